"""PyTorch's layers and functions that fit none of kiln.nn's other modules, with its signatures,
defaults, reprs and errors, each composed of kiln.mint ops (so autograd differentiates them and
kiln.jit traces them); kiln.nn.functional exports the functions:

    shuffle = kiln.nn.ChannelShuffle(2)         # [N, 4, H, W]: channels 0, 2, 1, 3
    lrn = kiln.nn.LocalResponseNorm(5)          # AlexNet's normalization across channels
    pool = kiln.nn.FractionalMaxPool2d(3, output_ratio=0.5, return_indices=True)
    y, indices = pool(x)                        # [N, C, H, W] -> [N, C, H // 2, W // 2] twice

- ``channel_shuffle(input, groups)`` (alias ``native_channel_shuffle``) and
  ``ChannelShuffle(groups)``: the C channels of input [N, C, ...] taken as [groups, C / groups]
  and transposed (ShuffleNet's shuffle).
- ``local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0)`` and
  ``LocalResponseNorm(size, alpha=1e-4, beta=0.75, k=1.0)``: x / (k + alpha * mean of x^2 over
  ``size`` neighbouring channels)^beta for input [N, C, ...] (at least 3 dimensions).
- ``CrossMapLRN2d(size, alpha=1e-4, beta=0.75, k=1)``: PyTorch's older, 4-d only variant (Note
  [CrossMapLRN2d's windows]).
- ``fractional_max_pool2d`` / ``3d(input, kernel_size, output_size=None, output_ratio=None,
  return_indices=False, _random_samples=None)``, their ``_with_indices`` spellings, and
  ``FractionalMaxPool2d`` / ``3d`` with the same arguments: max pooling over windows at
  pseudo-random fractional strides (Graham, 2014; Note [Fractional windows]).
- ``pdist(input, p=2)``: the p-norm distances between the rows of input [N, M], the pairs
  (i, j) with i < j in row-major order.
- ``gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1)``: softmax((logits + g) / tau)
  for Gumbel(0, 1) noise g; ``hard=True`` returns the one-hot of its maximum with the soft
  sample's gradient (straight through).
- ``upsample``, ``upsample_nearest``, ``upsample_bilinear``: PyTorch's deprecated spellings of
  interpolate, with its warnings.

Where this differs from PyTorch: CrossMapLRN2d's gradient is the gradient of its forward.
PyTorch's hand-written backward is not (it fails gradcheck, and raises for size 1).
"""

import math
import warnings

from .. import _C, mint as _mint
from .._checks import checked_bool, checked_int
from ..errors import DTypeError, KilnValueError, ShapeError
from ..mint._composite import _cast, _dims, _floating_tensor, _widened, check_real
from ..mint._random import sample_dtype
from ._layer_arguments import batched, checked_sizes, checked_tensor
from ._volume_functions import max_pool3d
from .cell import Cell
from .upsampling import interpolate

__all__ = ["channel_shuffle", "native_channel_shuffle", "local_response_norm",
           "fractional_max_pool2d", "fractional_max_pool2d_with_indices", "fractional_max_pool3d",
           "fractional_max_pool3d_with_indices", "pdist", "gumbel_softmax", "upsample",
           "upsample_nearest", "upsample_bilinear", "ChannelShuffle", "LocalResponseNorm",
           "CrossMapLRN2d", "FractionalMaxPool2d", "FractionalMaxPool3d"]


# ------------------------------------------------------------------------------------------------
# Channel shuffle


def channel_shuffle(input, groups):  # noqa: A002
    """channel_shuffle(input, groups): input [N, C, ...] (at least 3 dimensions, C divisible by
    ``groups``, an int >= 1) with its channels viewed as [groups, C / groups] and transposed:
    output channel j * groups + g is input channel g * (C / groups) + j. Dimension 1 holds the
    channels whatever the rank, as in PyTorch."""
    owner = "channel_shuffle"
    checked_tensor(owner, "input", input)
    groups = checked_int(owner, "groups", groups, low=1)
    if input.ndim < 3:
        raise ShapeError(f"{owner}: expected input [N, C, ...] of at least 3 dimensions, got "
                         f"{_dims(input.shape)}")
    n, channels, *rest = input.shape
    if channels % groups:
        raise ShapeError(f"{owner}: expected the channels (dim 1) of input {_dims(input.shape)} "
                         f"to be divisible by groups = {groups}")
    grouped = input.reshape([n, groups, channels // groups] + rest)
    return _mint.transpose(grouped, 1, 2).reshape(input.shape)


def native_channel_shuffle(input, groups):  # noqa: A002
    """native_channel_shuffle(input, groups): channel_shuffle (PyTorch's name for its kernel)."""
    return channel_shuffle(input, groups)


class ChannelShuffle(Cell):
    """ChannelShuffle(groups): channel_shuffle of its input [N, C, ...] into ``groups`` (an int
    >= 1) groups."""

    def __init__(self, groups):
        super().__init__()
        self.groups = checked_int("ChannelShuffle", "groups", groups, low=1)

    def construct(self, x):
        return channel_shuffle(x, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"


# ------------------------------------------------------------------------------------------------
# Local response normalization


def _channel_means(x, before, after):
    """The mean of x [N, C, ...] over channels c - before to c + after of each channel c, zeros
    outside (the divisor is always the window's length): one kiln.mint.avg_pool2d of kernel
    (before + after + 1, 1) over x viewed as [N, 1, C, rest] and zero-padded along C, as
    PyTorch's local_response_norm pools."""
    n, channels = x.shape[:2]
    planes = x.reshape(n, 1, channels, math.prod(x.shape[2:]))
    padded = _mint.pad(planes, (0, 0, before, after))
    return _mint.avg_pool2d(padded, (before + after + 1, 1), 1).reshape(x.shape)


def _lrn_constants(owner, size, alpha, beta, k):
    """A local response normalization's ``size`` (an int >= 1) and ``alpha``, ``beta``, ``k``
    (real numbers), checked; returned as they are (a cell's repr shows them as given)."""
    checked_int(owner, "size", size, low=1)
    for name, value in (("alpha", alpha), ("beta", beta), ("k", k)):
        check_real(owner, name, value)
    return size, alpha, beta, k


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):  # noqa: A002
    """local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0): x / (k + alpha * m)^beta
    for input [N, C, ...] (floating point, at least 3 dimensions), m the mean of x^2 over
    channels c - size // 2 to c + (size - 1) // 2 (zeros past the ends, always divided by
    ``size``), as PyTorch's. An input with no elements is returned as it is. 16-bit floats are
    computed in float32 and rounded once."""
    owner = "local_response_norm"
    dtype = _floating_tensor(owner, "input", input)
    size, alpha, beta, k = _lrn_constants(owner, size, alpha, beta, k)
    if input.ndim < 3:
        raise ShapeError(f"{owner}: expected input [N, C, ...] of at least 3 dimensions, got "
                         f"{_dims(input.shape)}")
    if input.numel() == 0:
        return input
    x = _widened(input)
    means = _channel_means(x * x, size // 2, (size - 1) // 2)
    return _cast(x / _mint.pow(means * alpha + k, beta), dtype)


class _ResponseNorm(Cell):
    """LocalResponseNorm's and CrossMapLRN2d's constants, checked at construction and kept as
    given, and their repr (PyTorch's)."""

    def __init__(self, size, alpha, beta, k):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = _lrn_constants(
            type(self).__name__, size, alpha, beta, k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class LocalResponseNorm(_ResponseNorm):
    """LocalResponseNorm(size, alpha=1e-4, beta=0.75, k=1.0): local_response_norm of its input
    [N, C, ...] with these constants."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__(size, alpha, beta, k)

    def construct(self, x):
        return local_response_norm(x, self.size, self.alpha, self.beta, self.k)


# Note [CrossMapLRN2d's windows]
# PyTorch's CrossMapLRN2d (a port of Lua Torch's) computes x * (k + alpha / size * s)^-beta with s
# the sum of x^2 over the channels c - r to c + r (r = (size - 1) // 2; an even size sums 2r + 1
# channels yet divides by size), kept as a running sum that adds channel c + r and subtracts
# channel c - r - 1 at each step. Its port to 0-based indices never subtracts channel 0, so from
# channel r + 1 on the sum also holds channel 0's square. Kiln computes those values (a model
# trained with it depends on them): the windowed sums, plus channel 0 where it stayed.


class CrossMapLRN2d(_ResponseNorm):
    """CrossMapLRN2d(size, alpha=1e-4, beta=0.75, k=1): PyTorch's cross-channel normalization of
    x [N, C, H, W] (another rank is a ShapeError), with its values (Note [CrossMapLRN2d's
    windows]) and the gradient of those values. 16-bit floats are computed in float32 and
    rounded once."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1):
        super().__init__(size, alpha, beta, k)

    def construct(self, x):
        owner = type(self).__name__
        dtype = _floating_tensor(owner, "input", x)
        if x.ndim != 4:
            raise ShapeError(f"{owner}: expected input [N, C, H, W], got {_dims(x.shape)} "
                             f"({x.ndim}-D)")
        if x.numel() == 0:
            return x
        x = _widened(x)
        square = x * x
        reach = (self.size - 1) // 2
        sums = _channel_means(square, reach, reach) * (2 * reach + 1)
        channels = x.shape[1]
        if channels > reach + 1:
            stayed = (_mint.arange(channels) > reach).reshape(channels, 1, 1)
            sums = sums + _mint.where(stayed, square[:, :1], 0.0)
        scale = sums * (self.alpha / self.size) + self.k
        return _cast(x * _mint.pow(scale, -self.beta), dtype)


# ------------------------------------------------------------------------------------------------
# Fractional max pooling

# Note [Fractional windows]
# PyTorch's fractional max pooling (FractionalMaxPool2d.cpp, 3d.cpp) draws one number u in [0, 1)
# per (sample, channel, spatial dimension): ``_random_samples`` [N, C, dims], the dimensions in
# the order (W, H) for 2-d (sic) and (D, H, W) for 3-d. Along a dimension of size n pooled to
# ``out`` windows of ``k``, window i < out - 1 starts at int((i + u) * alpha) - int(u * alpha)
# for alpha = (n - k) / (out - 1), the last at n - k; both products are computed in the input's
# dtype (the samples'), so the starts are computed here in that dtype too, which makes them
# PyTorch's for the same samples. Each window's elements are gathered (the rows, then the
# columns, then the depths' planes), which lays every window out as a block of k elements per
# dimension, and kiln's max pooling with stride = kernel takes each block's maximum (its first,
# or the last NaN: PyTorch's scan in (d, h, w) order) and its index in the gathered blocks, which
# a gather of the gathered elements' input offsets turns into PyTorch's index. The gathers and
# the pooling carry the gradient to the maximum's element.


def _fraction_sizes(owner, output_ratio, spatial):
    """``output_ratio`` (a real number, or a sequence of ``spatial`` of them) as a tuple of
    floats: a KilnTypeError for another kind of value, a KilnValueError for another length."""
    if isinstance(output_ratio, (tuple, list)):
        if len(output_ratio) != spatial:
            raise KilnValueError(f"{owner}: expected output_ratio to be a number or a sequence "
                                 f"of {spatial}, got {len(output_ratio)} values {output_ratio!r}")
        return tuple(check_real(owner, "output_ratio", r) for r in output_ratio)
    return (check_real(owner, "output_ratio", output_ratio),) * spatial


def _checked_samples(owner, samples, x, spatial):
    """``_random_samples`` (None: drawn here, uniform in [0, 1) per sample, channel and
    dimension) as [N, C, spatial] of x's dtype for x [N, C, *sizes]: a kiln tensor of x's dtype
    (else a DTypeError) [N' >= N, C, spatial] (else a ShapeError), PyTorch's checks."""
    n, channels = x.shape[:2]
    if samples is None:
        draws = _mint.rand([n, channels, spatial], dtype=sample_dtype(x))
        return _cast(draws, x.dtype)
    checked_tensor(owner, "_random_samples", samples)
    if samples.dtype != x.dtype:
        raise DTypeError(f"{owner}: expected _random_samples of the input's dtype "
                         f"{x.dtype.name}, got {samples.dtype.name}")
    if samples.ndim != 3 or samples.shape[0] < n \
            or list(samples.shape[1:]) != [channels, spatial]:
        raise ShapeError(f"{owner}: expected _random_samples [N, C, {spatial}] with N at least "
                         f"the batch's {n} and C = {channels}, got {_dims(samples.shape)}")
    return samples[:n]


def _window_starts(samples, size, out, kernel):
    """[N, C, out] int64: the first input position of each of ``out`` windows of ``kernel`` along
    a dimension of ``size``, from the samples [N, C] of that dimension (Note [Fractional
    windows])."""
    last = _mint.full(list(samples.shape) + [min(out, 1)], size - kernel, dtype=_C.dtype.int64)
    if out <= 1:
        return last
    alpha = _C.tensor(size - kernel, dtype=samples.dtype) / (out - 1)
    u = _mint.unsqueeze(samples, -1)
    steps = _mint.arange(out - 1, dtype=samples.dtype) + u
    starts = (steps * alpha).to(_C.dtype.int64) - (u * alpha).to(_C.dtype.int64)
    return _mint.cat([starts, last], -1)


def _gathered_windows(x, samples, kernel, sizes_out):
    """(blocks, offsets) for x [N, C, *sizes] and its samples [N, C, dims]: ``blocks`` holds
    each window's elements gathered dimension by dimension, so that window (i, j, ...) is the
    block [i * k_1 : (i + 1) * k_1, j * k_2 : ...]; ``offsets`` (int64, broadcast to blocks'
    shape) the input offset of each gathered element in its plane or volume (Note [Fractional
    windows])."""
    n, channels, *sizes = x.shape
    spatial = len(sizes)
    # The samples' order of the dimensions: (W, H) for 2-d, (D, H, W) for 3-d.
    order = (1, 0) if spatial == 2 else (0, 1, 2)
    blocks, offsets = x, None
    for d, (size, k, out) in enumerate(zip(sizes, kernel, sizes_out)):
        starts = _window_starts(samples[:, :, order[d]], size, out, k)
        along = [n, channels] + [1] * spatial  # the positions along d, against the others
        along[2 + d] = out * k
        positions = (_mint.unsqueeze(starts, -1) + _mint.arange(k)).reshape(along)
        shape = list(blocks.shape)
        shape[2 + d] = out * k
        blocks = _mint.gather(blocks, 2 + d, positions.expand(shape))
        stride = math.prod(sizes[d + 1:])
        offsets = positions * stride if offsets is None else offsets + positions * stride
    return blocks, offsets


def _fractional_max_pool(owner, input, kernel_size, output_size, output_ratio,  # noqa: A002
                         with_indices, random_samples, spatial):
    """fractional_max_pool2d / 3d (``spatial`` 2 or 3) of input [N, C, *sizes] or one sample
    [C, *sizes] (Note [Fractional windows]); (values, indices) ``with_indices``."""
    kernel = checked_sizes(owner, "kernel_size", kernel_size, spatial, 1)
    _floating_tensor(owner, "input", input)
    if output_size is not None:
        outs = checked_sizes(owner, "output_size", output_size, spatial, 0)
    elif output_ratio is not None:
        ratios = _fraction_sizes(owner, output_ratio, spatial)
    else:
        raise KilnValueError(f"{owner}: expected an output_size or an output_ratio, got neither")
    names = ("depth", "height", "width")[3 - spatial:]

    def compute(x):  # x [N, C, *sizes]
        if 0 in x.shape[1:]:
            raise ShapeError(f"{owner}: expected input with non-zero sizes in every dimension "
                             f"but the batch's, got {_dims(input.shape)}")
        n, channels, *sizes = x.shape
        sizes_out = outs if output_size is not None else tuple(
            int(size * ratio) for size, ratio in zip(sizes, ratios))
        # PyTorch's bound: out + k - 1 at most the size in 2-d, below it in 3-d.
        for name, size, k, out in zip(names, sizes, kernel, sizes_out):
            if out < 0 or out + k - 1 > size - (spatial == 3):
                relation = "<" if spatial == 3 else "<="
                raise ShapeError(f"{owner}: expected output {name} + kernel {name} - 1 "
                                 f"{relation} input {name} ({size}), got output {name} {out} "
                                 f"and kernel {name} {k}")
        samples = _checked_samples(owner, random_samples, x, spatial)
        blocks, offsets = _gathered_windows(x, samples, kernel, sizes_out)
        if blocks.numel() == 0:  # no window (or no sample): nothing for a pooling to scan
            values = blocks.reshape([n, channels] + list(sizes_out))
            indices = _mint.zeros(values.shape, dtype=_C.dtype.int64)
            return (values, indices) if with_indices else values
        if spatial == 2:
            pool = _mint.max_pool2d_with_indices if with_indices else _mint.max_pool2d
            result = pool(blocks, kernel, kernel)
        else:
            result = max_pool3d(blocks, kernel, kernel, return_indices=with_indices)
        if not with_indices:
            return result
        values, at = result  # ``at``: offsets in the blocks' planes, mapped back by ``offsets``
        lead = [n, channels, -1]
        flat = offsets.expand(blocks.shape).reshape(lead)
        return values, _mint.gather(flat, 2, at.reshape(lead)).reshape(at.shape)

    return batched(owner, input, spatial, compute)


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None,  # noqa: A002
                                       output_ratio=None, return_indices=False,
                                       _random_samples=None):
    """fractional_max_pool2d_with_indices(input, kernel_size, output_size=None,
    output_ratio=None, return_indices=False, _random_samples=None): fractional_max_pool2d's
    (values, indices), whatever ``return_indices``."""
    return _fractional_max_pool("fractional_max_pool2d", input, kernel_size, output_size,
                                output_ratio, True, _random_samples, 2)


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None,  # noqa: A002
                          return_indices=False, _random_samples=None):
    """fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None,
    return_indices=False, _random_samples=None): the maximum of input [N, C, H, W] (or one
    sample [C, H, W]; floating point, non-empty planes) over ``kernel_size`` windows (an int or
    a pair) at PyTorch's pseudo-random fractional steps (Note [Fractional windows]), to
    ``output_size`` (an int or a pair), or else int(size * ``output_ratio``) (a number or a
    pair) per dimension; an output + kernel - 1 above the input's size is a ShapeError, as in
    PyTorch.
    ``_random_samples`` [N, C, 2] of the input's dtype, uniform in [0, 1), fixes the windows
    (PyTorch's for the same samples); None draws them (kiln.manual_seed repeats them). With
    ``return_indices=True``, (values, indices): the int64 offset h * W + w of each maximum in
    its plane, which max_unpool2d takes."""
    with_indices = checked_bool("fractional_max_pool2d", "return_indices", return_indices)
    return _fractional_max_pool("fractional_max_pool2d", input, kernel_size, output_size,
                                output_ratio, with_indices, _random_samples, 2)


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None,  # noqa: A002
                                       output_ratio=None, return_indices=False,
                                       _random_samples=None):
    """fractional_max_pool3d_with_indices(input, kernel_size, output_size=None,
    output_ratio=None, return_indices=False, _random_samples=None): fractional_max_pool3d's
    (values, indices), whatever ``return_indices``."""
    return _fractional_max_pool("fractional_max_pool3d", input, kernel_size, output_size,
                                output_ratio, True, _random_samples, 3)


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None,  # noqa: A002
                          return_indices=False, _random_samples=None):
    """fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None,
    return_indices=False, _random_samples=None): fractional_max_pool2d over input [N, C, D, H,
    W] (or one sample [C, D, H, W]), the sizes ints or triples, ``_random_samples``
    [N, C, 3]; the indices are offsets d * H * W + h * W + w in each volume (max_unpool3d's).
    As PyTorch's, output + kernel - 1 must be below the input's size in each dimension (a
    ShapeError otherwise)."""
    with_indices = checked_bool("fractional_max_pool3d", "return_indices", return_indices)
    return _fractional_max_pool("fractional_max_pool3d", input, kernel_size, output_size,
                                output_ratio, with_indices, _random_samples, 3)


class _FractionalMaxPool(Cell):
    """FractionalMaxPool2d's and 3d's arguments, checked at construction and kept as PyTorch
    keeps them (tuples of ``_spatial`` sizes or ratios); ``_random_samples`` (None, or a tensor)
    is a buffer, so that a state dict carries it. ``_pool`` is the function that computes them.
    PyTorch's repr shows no argument."""

    _spatial = None
    _pool = None

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                 _random_samples=None):
        super().__init__()
        owner, spatial = type(self).__name__, self._spatial
        self.kernel_size = checked_sizes(owner, "kernel_size", kernel_size, spatial, 1)
        self.return_indices = checked_bool(owner, "return_indices", return_indices)
        if _random_samples is not None:
            checked_tensor(owner, "_random_samples", _random_samples)
        self.register_buffer("_random_samples", _random_samples)
        if output_size is None and output_ratio is None:
            raise KilnValueError(f"{owner}: expected an output_size or an output_ratio, got "
                                 f"neither")
        if output_size is not None and output_ratio is not None:
            raise KilnValueError(f"{owner}: expected only one of output_size and output_ratio, "
                                 f"got both")
        self.output_size = (None if output_size is None
                            else checked_sizes(owner, "output_size", output_size, spatial, 0))
        self.output_ratio = (None if output_ratio is None
                             else _fraction_sizes(owner, output_ratio, spatial))
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise KilnValueError(f"{owner}: expected output_ratio between 0 and 1 (exclusive), "
                                 f"got {output_ratio!r}")

    def construct(self, x):
        return self._pool(x, self.kernel_size, self.output_size, self.output_ratio,
                          self.return_indices, self._random_samples)


class FractionalMaxPool2d(_FractionalMaxPool):
    """FractionalMaxPool2d(kernel_size, output_size=None, output_ratio=None,
    return_indices=False, _random_samples=None): fractional_max_pool2d of x [N, C, H, W] or
    [C, H, W] to ``output_size`` (an int or a pair) or by ``output_ratio`` (in (0, 1), a number
    or a pair), exactly one of them given (a KilnValueError otherwise); ``_random_samples``
    [N, C, 2] fixes the windows of every call, else each call draws its own."""

    _spatial = 2
    _pool = staticmethod(fractional_max_pool2d)


class FractionalMaxPool3d(_FractionalMaxPool):
    """FractionalMaxPool3d(kernel_size, output_size=None, output_ratio=None,
    return_indices=False, _random_samples=None): FractionalMaxPool2d over x [N, C, D, H, W] or
    [C, D, H, W] (fractional_max_pool3d), the sizes and ratios ints or triples,
    ``_random_samples`` [N, C, 3]."""

    _spatial = 3
    _pool = staticmethod(fractional_max_pool3d)


# ------------------------------------------------------------------------------------------------
# Distances, sampling, deprecated spellings


def pdist(input, p=2):  # noqa: A002
    """pdist(input, p=2): the p-norm distances ||input[i] - input[j]||_p between the rows of
    input [N, M] (floating point) for every pair i < j, in row-major order: [N * (N - 1) / 2]
    (kiln.mint.vector_norm of the rows' differences; p = 0 counts the differing elements, inf
    takes the largest). Another rank is a ShapeError, a negative p a KilnValueError."""
    owner = "pdist"
    _floating_tensor(owner, "input", input)
    if input.ndim != 2:
        raise ShapeError(f"{owner}: expected a 2-D input [N, M], got {_dims(input.shape)}")
    p = check_real(owner, "p", p)
    if p < 0:
        raise KilnValueError(f"{owner}: expected a non-negative p, got {p}")
    rows = input.shape[0]
    pairs = _mint.triu_indices(rows, rows, 1)
    differences = _mint.index_select(input, 0, pairs[0]) - _mint.index_select(input, 0, pairs[1])
    return _mint.vector_norm(differences, p, -1)


def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    """gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1): a sample of the Gumbel-
    softmax distribution, softmax((logits + g) / tau) along ``dim`` for g = -log(e), e drawn
    from Exp(1) per element (kiln.manual_seed repeats it; float32 draws for 16-bit logits). With
    ``hard=True`` the one-hot of its maximum along ``dim``, y_hard - y_soft.detach() + y_soft,
    whose gradient is the soft sample's (straight through). ``eps`` is deprecated and unused, as
    in PyTorch (with its warning when given)."""
    owner = "gumbel_softmax"
    dtype = _floating_tensor(owner, "logits", logits)
    tau = check_real(owner, "tau", tau)
    hard = checked_bool(owner, "hard", hard)
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    # Exp(1) as kiln.Tensor.exponential_ draws it, -log(1 - u) for u uniform in [0, 1).
    exponentials = -_mint.log1p(-_mint.rand_like(logits, dtype=sample_dtype(logits)))
    soft = _mint.softmax((_widened(logits) - _mint.log(exponentials)) / tau, dim)
    if hard:
        index = _mint.argmax(soft, dim, True)
        one_hot = _mint.scatter(_mint.zeros_like(soft), dim, index, 1.0)
        soft = one_hot - soft.detach() + soft
    return _cast(soft, dtype)


def upsample(input, size=None, scale_factor=None, mode="nearest",  # noqa: A002
             align_corners=None):
    """upsample(input, size=None, scale_factor=None, mode='nearest', align_corners=None):
    interpolate, under PyTorch's deprecation warning."""
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` "
                  "instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):  # noqa: A002
    """upsample_nearest(input, size=None, scale_factor=None): interpolate in mode "nearest",
    under PyTorch's deprecation warning."""
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):  # noqa: A002
    """upsample_bilinear(input, size=None, scale_factor=None): interpolate in mode "bilinear"
    with align_corners=True, under PyTorch's deprecation warning."""
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)
