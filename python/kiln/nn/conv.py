"""kiln.nn.Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d and ConvTranspose3d:
convolutions of x [N, C_in, L], [N, C_in, H, W] and [N, C_in, D, H, W], or of one sample
[C_in, L], [C_in, H, W] or [C_in, D, H, W] (PyTorch's unbatched input), whose output then has no
batch dimension either.

    conv = kiln.nn.Conv2d(3, 16, kernel_size=3, padding=1)
    up = kiln.nn.ConvTranspose2d(16, 8, kernel_size=2, stride=2)   # doubles H and W
    vol = kiln.nn.Conv3d(1, 8, kernel_size=(1, 3, 3), padding=(0, 1, 1))

Conv2d's weight is [C_out, C_in / groups, kH, kW]; Conv1d's [C_out, C_in / groups, k] (computed
as a Conv2d over a height of 1, F.conv1d); Conv3d's [C_out, C_in / groups, kD, kH, kW] (F.conv3d,
composed of a conv2d, kiln/nn/_volume_functions.py); the transposed convolutions', as PyTorch's,
[C_in, C_out / groups, *kernel] (kiln.mint.conv_transpose2d; F.conv_transpose1d and
F.conv_transpose3d over it). ``kernel_size``, ``stride``, ``padding`` and ``dilation`` take an
int or a tuple of one int per spatial dimension. Conv1d's, Conv2d's and Conv3d's ``padding`` may
also be "valid" (no padding) or "same" (the output keeps the input's size: the dilated kernel's
size - 1 in all, an odd element after; stride 1 only), as in PyTorch, and their
``padding_mode`` is "zeros" (the default), "reflect", "replicate" or "circular": the last three
pad x with ``kiln.mint.pad`` in that mode before a convolution without padding, as PyTorch does.
The transposed convolutions take PyTorch's ``output_padding`` (each below the stride or the
dilation), and only padding_mode "zeros" and no padding string, as PyTorch's; their call takes
PyTorch's ``output_size``, which picks the output_padding that gives that size.

Initialised as PyTorch's: weight ~ kaiming_uniform_(a=sqrt(5)) and bias ~ U(-1/sqrt(fan_in),
1/sqrt(fan_in)), with PyTorch's fan_in of the weight (its dim 1 times the kernel's size): C_in /
groups * kH * kW, and for the transposed convolutions C_out / groups * kH * kW (times kD in 3-d).

The input must have the parameters' dtype (``dtype``, by default the default dtype): another one, a
float64 or an integer batch, is a DTypeError naming both, as in PyTorch (the calls are the F
functions of the same names, whose errors they raise).
"""

import math

from .. import _C
from .._checks import as_int, checked_int
from ..errors import KilnTypeError, KilnValueError
from ..mint import _composite
from . import functional as F
from . import init
from ._layer_arguments import batched
from ._volume_functions import conv3d, conv_transpose3d
from .cell import Cell
from .parameter import Parameter

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")
# How the messages name a tuple of one int per spatial dimension.
_TUPLES = {1: "a tuple of one int", 2: "a pair of ints", 3: "a tuple of three ints"}


class _Conv(Cell):
    """What the convolutions share, as PyTorch's _ConvNd: their checked arguments (as Python ints,
    named in errors by the class), parameters, initialisation and repr, and the call, which
    gives each subclass's ``_convolve`` a batch [N, C_in, *spatial]. ``_dims`` is the number
    of spatial dimensions; a ``_transposed`` convolution's weight is [C_in, C_out / groups,
    *kernel], another's [C_out, C_in / groups, *kernel]."""

    _dims = 2
    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", dtype=None):
        super().__init__()
        owner = type(self).__name__
        if padding_mode not in _PADDING_MODES:
            raise KilnValueError(f"{owner}: padding_mode must be one of "
                                 f"{', '.join(map(repr, _PADDING_MODES))}, got {padding_mode!r}")
        in_channels = checked_int(owner, "in_channels", in_channels)
        out_channels = checked_int(owner, "out_channels", out_channels)
        groups = checked_int(owner, "groups", groups)
        if groups <= 0 or in_channels % groups or out_channels % groups:
            raise KilnValueError(f"{owner}: in_channels ({in_channels}) and out_channels "
                                 f"({out_channels}) must be divisible by groups ({groups})")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = self._ints(kernel_size, "kernel_size")
        self.stride = self._ints(stride, "stride")
        self.padding = self._padding(padding)
        self.dilation = self._ints(dilation, "dilation")
        self.groups = groups
        self.padding_mode = padding_mode
        channels = ((in_channels, out_channels // groups) if self._transposed
                    else (out_channels, in_channels // groups))
        self.weight = Parameter(_C.mint.empty(channels + self.kernel_size, dtype=dtype))
        self.bias = Parameter(_C.mint.empty(out_channels, dtype=dtype)) if bias else None
        self.reset_parameters()

    def _ints(self, value, name):
        """``value`` (an int or a tuple of ``_dims`` ints) as a tuple of ``_dims`` Python ints."""
        owner, count = type(self).__name__, self._dims
        index = as_int(value)
        if index is not None:
            return (index,) * count
        try:
            values = tuple(value)
        except TypeError:
            raise KilnTypeError(f"{owner}: {name} must be an int or {_TUPLES[count]}, got "
                                f"{value!r} ({type(value).__name__})") from None
        if len(values) != count:
            raise KilnValueError(f"{owner}: {name} must be an int or {_TUPLES[count]}, got "
                                 f"{value!r}")
        return tuple(checked_int(owner, f"{name}[{i}]", v) for i, v in enumerate(values))

    def _padding(self, value):
        """``padding``: "same" or "valid" as it is (as PyTorch keeps it), else as a tuple of ints.
        "same" with a stride other than 1 is a KilnValueError, as in PyTorch."""
        if not isinstance(value, str):
            return self._ints(value, "padding")
        owner = type(self).__name__
        if value not in _composite.PADDING_STRINGS:
            raise KilnValueError(f"{owner}: padding must be 'same', 'valid', an int or "
                                 f"{_TUPLES[self._dims]}, got {value!r}")
        if value == "same" and self.stride != (1,) * self._dims:
            raise KilnValueError(f"{owner}: padding='same' needs stride 1 (the output could not "
                                 f"keep the input's size), got stride {self.stride}")
        return value

    def construct(self, x):
        # One sample [C_in, *spatial] is convolved as a batch of one; the rank is checked before
        # any padding (batched).
        return batched(type(self).__name__, x, self._dims, self._convolve)

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init.fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def _padded(self, x):
        """(x, padding) for a convolution: for a padding_mode other than "zeros", x padded in
        that mode (kiln.mint.pad, last dimension first) and padding 0."""
        if self.padding_mode == "zeros":
            return x, self.padding
        if self.padding == "same":
            pairs = _composite.same_padding(self.kernel_size, self.dilation)
        else:
            padding = (0,) * self._dims if self.padding == "valid" else self.padding
            pairs = tuple((p, p) for p in padding)
        return _C.mint.pad(x, tuple(v for pair in reversed(pairs) for v in pair),
                           self.padding_mode), 0

    def extra_repr(self):
        output_padding = (f", output_padding={self.output_padding}" if self._transposed
                          else "")
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}{output_padding}, "
                f"dilation={self.dilation}, groups={self.groups}, bias={self.bias is not None}"
                + (f", padding_mode={self.padding_mode!r}" if self.padding_mode != "zeros" else ""))


class Conv1d(_Conv):
    """Conv1d(in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
    bias=True, padding_mode="zeros", dtype=None): 1-d convolution of x [N, C_in, L] to
    [N, C_out, L_out] (or of [C_in, L] to [C_out, L_out]), with parameters of ``dtype`` (default:
    the default dtype). The arguments and the initialisation are in kiln.nn.conv's documentation;
    errors at the call are F.conv1d's."""

    _dims = 1

    def _convolve(self, x):
        x, padding = self._padded(x)
        return F.conv1d(x, self.weight, self.bias, self.stride, padding, self.dilation,
                        self.groups)


class Conv2d(_Conv):
    """Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
    bias=True, padding_mode="zeros", dtype=None): 2-d convolution of x [N, C_in, H, W] to
    [N, C_out, H_out, W_out] (or of [C_in, H, W] to [C_out, H_out, W_out]), with parameters of
    ``dtype`` (default: the default dtype). The arguments and the initialisation are in
    kiln.nn.conv's documentation; errors at the call are F.conv2d's."""

    def _convolve(self, x):
        x, padding = self._padded(x)
        return F.conv2d(x, self.weight, self.bias, self.stride, padding, self.dilation,
                        self.groups)


class Conv3d(_Conv):
    """Conv3d(in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
    bias=True, padding_mode="zeros", dtype=None): 3-d convolution of x [N, C_in, D, H, W] to
    [N, C_out, D_out, H_out, W_out] (or of [C_in, D, H, W] to [C_out, D_out, H_out, W_out]), with
    parameters of ``dtype`` (default: the default dtype). The arguments and the initialisation are
    in kiln.nn.conv's documentation; errors at the call are F.conv3d's."""

    _dims = 3

    def _convolve(self, x):
        x, padding = self._padded(x)
        return conv3d(x, self.weight, self.bias, self.stride, padding, self.dilation,
                      self.groups)


class _ConvTranspose(_Conv):
    """What the transposed convolutions share: checks of padding and output_padding, and
    the call ``up(x, output_size=None)``, whose ``output_size`` picks the output_padding (see
    ConvTranspose2d). A subclass sets ``_dims`` and ``_function`` (the F function it calls)."""

    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 dtype=None):
        owner = type(self).__name__
        if padding_mode != "zeros":
            raise KilnValueError(f"{owner}: only padding_mode 'zeros' is supported, as "
                                 f"in PyTorch, got {padding_mode!r}")
        if isinstance(padding, str):
            raise KilnValueError(f"{owner}: padding must be an int or {_TUPLES[self._dims]}, "
                                 f"got {padding!r} (a transposed convolution takes no padding "
                                 f"string, as in PyTorch)")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, dtype)
        self.output_padding = self._ints(output_padding, "output_padding")
        for extra, stride_, dilation_ in zip(self.output_padding, self.stride, self.dilation):
            if extra < 0 or (extra >= stride_ and extra >= dilation_):
                raise KilnValueError(f"{owner}: output_padding must be >= 0 and below "
                                     f"the stride or the dilation, got output_padding "
                                     f"{self.output_padding} with stride {self.stride} and "
                                     f"dilation {self.dilation}")

    def construct(self, x, output_size=None):
        def convolve(batch):
            # The output_padding from x as given: one sample's output_size may name C_out.
            output_padding = (self.output_padding if output_size is None
                              else self._output_padding(x, output_size))
            return type(self)._function(batch, self.weight, self.bias, self.stride,
                                        self.padding, output_padding, self.groups,
                                        self.dilation)

        return batched(type(self).__name__, x, self._dims, convolve)

    def _output_padding(self, x, output_size):
        """The output_padding that gives x (of a rank batched checked) the output [...,
        *output_size[-dims:]] (PyTorch's _output_padding): each size between the smallest output
        and that plus stride - 1."""
        owner, dims = type(self).__name__, self._dims
        try:
            values = list(output_size)
        except TypeError:
            raise KilnTypeError(f"{owner}: output_size must be a sequence of ints, got "
                                f"{type(output_size).__name__} {output_size!r}") from None
        sizes = [checked_int(owner, f"output_size[{i}]", v) for i, v in enumerate(values)]
        whole = x.ndim  # [N, C_out, *spatial], or [C_out, *spatial] for one sample
        if len(sizes) == whole:
            sizes = sizes[-dims:]
        if len(sizes) != dims:
            spatial = _OUTPUT_SIZES[dims]
            shape = f"[N, C_out, {spatial}]" if whole == dims + 2 else f"[C_out, {spatial}]"
            raise KilnValueError(f"{owner}: output_size must be [{spatial}] or "
                                 f"{shape} (for input {list(x.shape)}), got {sizes}")
        smallest = [(n - 1) * s - 2 * p + d * (k - 1) + 1 for n, s, p, d, k in
                    zip(x.shape[-dims:], self.stride, self.padding, self.dilation,
                        self.kernel_size)]
        largest = [low + s - 1 for low, s in zip(smallest, self.stride)]
        if any(not low <= size <= high for size, low, high in zip(sizes, smallest, largest)):
            raise KilnValueError(f"{owner}: requested an output size of {sizes}, but "
                                 f"valid sizes range from {smallest} to {largest} (for an input "
                                 f"of {list(x.shape[-dims:])})")
        return [size - low for size, low in zip(sizes, smallest)]


# How output_size's spatial part is written, by the number of spatial dims.
_OUTPUT_SIZES = {1: "L_out", 2: "H_out, W_out", 3: "D_out, H_out, W_out"}


class ConvTranspose1d(_ConvTranspose):
    """ConvTranspose1d(in_channels, out_channels, kernel_size, stride=1, padding=0,
    output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros", dtype=None): the
    transposed 1-d convolution (F.conv_transpose1d) of x [N, C_in, L] to [N, C_out, L_out] (or
    of [C_in, L] to [C_out, L_out]), L_out = (L - 1) * stride - 2 * padding + dilation * (k - 1)
    + output_padding + 1; the rest is ConvTranspose2d's, over one spatial dimension
    (``output_size`` is [L_out] or a whole shape)."""

    _dims = 1
    _function = staticmethod(F.conv_transpose1d)


class ConvTranspose2d(_ConvTranspose):
    """ConvTranspose2d(in_channels, out_channels, kernel_size, stride=1, padding=0,
    output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros", dtype=None): the
    transposed 2-d convolution (F.conv_transpose2d) of x [N, C_in, H, W] to [N, C_out, H_out,
    W_out] (or of [C_in, H, W] to [C_out, H_out, W_out]), H_out = (H - 1) * stride - 2 * padding
    + dilation * (kH - 1) + output_padding + 1 (W_out likewise), with parameters of ``dtype``
    (default: the default dtype). ``output_padding`` must be below the stride or the dilation,
    ``padding_mode`` "zeros" and ``padding`` no string (else a KilnValueError); the rest is in
    kiln.nn.conv's documentation.

    Called as ``up(x, output_size=None)``: an ``output_size`` ([H_out, W_out], or a whole shape
    [N, C_out, H_out, W_out], [C_out, H_out, W_out] for one sample) picks the output_padding that
    gives that size, as PyTorch's; a size that no output_padding below the stride gives is a
    KilnValueError naming the valid range."""

    _function = staticmethod(F.conv_transpose2d)


class ConvTranspose3d(_ConvTranspose):
    """ConvTranspose3d(in_channels, out_channels, kernel_size, stride=1, padding=0,
    output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros", dtype=None): the
    transposed 3-d convolution (F.conv_transpose3d) of x [N, C_in, D, H, W] to [N, C_out, D_out,
    H_out, W_out] (or of [C_in, D, H, W] to [C_out, D_out, H_out, W_out]), D_out = (D - 1) *
    stride - 2 * padding + dilation * (kD - 1) + output_padding + 1 (H_out and W_out likewise);
    the rest is ConvTranspose2d's, over three spatial dimensions (``output_size`` is [D_out,
    H_out, W_out] or a whole shape)."""

    _dims = 3
    _function = staticmethod(conv_transpose3d)
