"""kiln.nn.init: fill a tensor in place with initial values, as torch.nn.init does.

    w = kiln.nn.Parameter(kiln.mint.empty(128, 64))
    kiln.nn.init.kaiming_uniform_(w, a=math.sqrt(5))   # what Linear and Conv2d use
    kiln.nn.init.zeros_(bias)

Every function writes into ``tensor`` under ``kiln.no_grad()`` and returns it. The random ones
take PyTorch's ``generator=`` (a ``kiln.Generator``) and draw from it; with None they draw from
the default generator, so ``kiln.manual_seed(n)`` makes them repeat.

    g = kiln.Generator().manual_seed(0)
    kiln.nn.init.xavier_uniform_(w, generator=g)   # the same values for every g seeded 0

- ``uniform_(t, a=0, b=1)`` and ``normal_(t, mean=0, std=1)`` (the Tensor methods
  ``t.uniform_`` and ``t.normal_`` under no_grad), ``constant_(t, value)``, ``zeros_(t)``,
  ``ones_(t)``.
- ``trunc_normal_(t, mean=0, std=1, a=-2, b=2)``: N(mean, std**2) truncated to [a, b] (the
  bounds are absolute values, not multiples of std, as in PyTorch).
- ``xavier_uniform_(t, gain=1)``: U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out));
  ``xavier_normal_(t, gain=1)``: N(0, gain * sqrt(2 / (fan_in + fan_out))).
- ``kaiming_uniform_(t, a=0, mode="fan_in", nonlinearity="leaky_relu")``: U(-b, b) with
  b = gain * sqrt(3 / fan); ``kaiming_normal_`` likewise with std = gain / sqrt(fan).
- ``orthogonal_(t, gain=1)``: a (semi-)orthogonal matrix times gain, from the QR decomposition
  of a normal sample, viewing ``t`` as [t.shape[0], the product of the rest].
- ``eye_(t)``: the identity matrix into a 2-d ``t``; ``dirac_(t, groups=1)``: the Dirac delta
  into a convolution's weight [out, in, *kernel] (3 to 5 dimensions), so the convolution keeps
  the first min(out / groups, in) input channels of each group (both fill any dtype).
- ``calculate_gain(nonlinearity, param=None)`` and ``fan_in_and_fan_out(t)``: the fans of a
  weight [out, in, *kernel] are in * prod(kernel) and out * prod(kernel).

The random initialisers (``uniform_``, ``normal_``, ``trunc_normal_``, ``xavier_*``,
``kaiming_*``, ``orthogonal_``) need a floating-point tensor: an integer or bool one is a
DTypeError, as in PyTorch (``constant_``, ``zeros_`` and ``ones_`` fill any dtype). A tensor with
no elements is returned unchanged after the arguments are checked (a fan of 0 has no bound), so
``Linear(0, 3)`` builds.

As in PyTorch, ``uniform_`` needs a <= b, with a, b and b - a finite values of the tensor's dtype,
and ``normal_`` needs std >= 0 (else the Tensor methods' KilnValueError, which calls a and b
``from`` and ``to``): anything else would fill the tensor with NaN, infinities or samples of
another range. ``trunc_normal_`` needs a finite mean, a finite std > 0 and a <= b (PyTorch
divides by std = 0 and fails on a > b). ``xavier_*`` and ``kaiming_*`` pass their bounds through
these checks, so on a tensor with elements a negative or NaN gain is refused too.
"""

import math
import warnings

from .. import _C
from .._numpy import np
from ..autograd import no_grad
from .._checks import checked_int
from ..errors import KilnValueError, ShapeError
from ..mint._composite import _dims, _kiln_tensor, check_real
from ..mint._random import check_floating, sample_dtype

__all__ = ["calculate_gain", "fan_in_and_fan_out", "uniform_", "normal_", "trunc_normal_",
           "constant_", "zeros_", "ones_", "xavier_uniform_", "xavier_normal_",
           "kaiming_uniform_", "kaiming_normal_", "orthogonal_", "eye_", "dirac_"]

_mint = _C.mint


def _fill(tensor, values):
    with no_grad():
        tensor[...] = values
    return tensor


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Samples U(a, b) into ``tensor`` from ``generator`` (None: the default generator), as
    ``tensor.uniform_(a, b, generator=generator)`` under no_grad: a > b, or a bound or b - a
    that is not a finite value of the tensor's dtype, is its KilnValueError (PyTorch's
    conditions)."""
    check_floating(tensor, "nn.init.uniform_")
    with no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Samples N(mean, std**2) into ``tensor`` from ``generator`` (None: the default
    generator), as ``tensor.normal_(mean, std, generator=generator)`` under no_grad: a negative
    or NaN std is its KilnValueError (as in PyTorch)."""
    check_floating(tensor, "nn.init.normal_")
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


def _normal_cdf(x):
    return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0


# PyTorch's erfinv (aten/src/ATen/native/Math.h, calc_erfinv, after Pavlis's MATLAB erfinv): a
# rational approximation, one for |y| <= 0.7 and one for the tails, then two Newton steps.
_ERFINV_CENTRAL = ((0.886226899, -1.645349621, 0.914624893, -0.140543331),
                   (1.0, -2.118377725, 1.442710462, -0.329097515, 0.012229801))
_ERFINV_TAIL = ((-1.970840454, -1.624906493, 3.429567803, 1.641345311),
                (1.0, 3.543889200, 1.637067800))


def _polynomial(coefficients, x):
    """sum(c[k] * x**k), by Horner's rule."""
    value = coefficients[-1]
    for c in reversed(coefficients[:-1]):
        value = value * x + c
    return value


def _erfinv(y):
    """The inverse error function of a float64 tensor with values in [-1, 1] (PyTorch's method:
    about float64 precision wherever the values are not within 1e-12 of -1 or 1)."""
    z = y * y
    central = y * _polynomial(_ERFINV_CENTRAL[0], z) / _polynomial(_ERFINV_CENTRAL[1], z)
    size = _mint.abs(y)
    s = _mint.sqrt(-_mint.log((1.0 - size) / 2.0))
    tail = _mint.sign(y) * _polynomial(_ERFINV_TAIL[0], s) / _polynomial(_ERFINV_TAIL[1], s)
    # erfinv(+-1) = +-inf, where the tail's formula is inf / inf.
    x = _mint.where(size <= 0.7, central, _mint.where(size == 1.0, y * math.inf, tail))
    for _ in range(2):
        slope = _mint.exp(-x * x) * (2.0 / math.sqrt(math.pi))
        # Where x is +-inf the slope is 0: the step would be NaN, and x is right as it is.
        x = x - _mint.where(slope > 0, (_mint.erf(x) - y) / slope, 0.0)
    return x


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Samples N(mean, std**2) truncated to [a, b] into ``tensor``, as PyTorch does: uniform
    values (from ``generator``; None: the default generator) between the normal CDF's values at
    a and b, mapped back through the inverse CDF and clamped to [a, b] (so every value lies in
    [a, b]). ``a`` and ``b`` are values, not multiples
    of std: the default [-2, 2] with std = 0.02 truncates nothing in practice. A mean more than 2
    std outside [a, b] warns, as in PyTorch: the CDF's values there are too close together for
    the samples to follow the distribution. A mean or std that is not finite, std <= 0 or a > b
    is a KilnValueError (a bound may be infinite)."""
    check_floating(tensor, "nn.init.trunc_normal_")
    mean, std, a, b = (check_real("nn.init.trunc_normal_", name, value)
                       for name, value in (("mean", mean), ("std", std), ("a", a), ("b", b)))
    if not (math.isfinite(mean) and 0.0 < std < math.inf):
        raise KilnValueError(f"nn.init.trunc_normal_: expected a finite mean and a finite std > "
                             f"0, got mean={mean}, std={std}")
    if not a <= b:  # NaN fails it too
        raise KilnValueError(f"nn.init.trunc_normal_: expected a <= b, got a={a}, b={b}")
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("nn.init.trunc_normal_: mean is more than 2 std from [a, b]; the "
                      "distribution of values may be incorrect", stacklevel=2)
    if tensor.numel() == 0:
        return tensor
    low, high = 2 * _normal_cdf((a - mean) / std) - 1, 2 * _normal_cdf((b - mean) / std) - 1
    # Mapped in float64, whatever the tensor's dtype: erfinv is steep near -1 and 1, where
    # float32 would lose most of the tail's precision.
    uniform = _mint.rand(tensor.shape, generator=generator,
                         dtype=sample_dtype(tensor)).to(_C.dtype.float64)
    values = _erfinv(uniform * (high - low) + low) * (std * math.sqrt(2.0)) + mean
    return _fill(tensor, _mint.clamp(values, a, b))


def constant_(tensor, value):
    """Fills ``tensor`` with ``value``."""
    return _fill(tensor, value)


def zeros_(tensor):
    """Fills ``tensor`` (of any dtype) with zeros."""
    return constant_(tensor, 0)


def ones_(tensor):
    """Fills ``tensor`` (of any dtype) with ones."""
    return constant_(tensor, 1)


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (PyTorch's table): 1 for linear, conv and sigmoid,
    5/3 for tanh, sqrt(2) for relu, sqrt(2 / (1 + slope**2)) for leaky_relu (slope 0.01 when
    ``param`` is None), 3/4 for selu."""
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "sigmoid")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        if isinstance(slope, bool) or not isinstance(slope, (int, float)):
            raise KilnValueError(f"calculate_gain: negative_slope {slope!r} is not a number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise KilnValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def fan_in_and_fan_out(tensor):
    """(fan_in, fan_out) of a weight [out, in, *kernel]; KilnValueError below two dimensions."""
    if tensor.ndim < 2:
        raise KilnValueError(f"fan in and fan out need a tensor with at least 2 dimensions, got "
                             f"shape {list(tensor.shape)}")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fan(tensor, mode):
    if mode not in ("fan_in", "fan_out"):
        raise KilnValueError(f"mode {mode!r} not supported, expected 'fan_in' or 'fan_out'")
    fan_in, fan_out = fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """Samples U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out)) into ``tensor`` (floating
    point, at least 2-d; fans as ``fan_in_and_fan_out``) from ``generator`` (None: the default
    generator)."""
    check_floating(tensor, "nn.init.xavier_uniform_")
    fan_in, fan_out = fan_in_and_fan_out(tensor)
    if tensor.numel() == 0:
        return tensor
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """Samples N(0, std**2) with std = gain * sqrt(2 / (fan_in + fan_out)) into ``tensor``
    (floating point, at least 2-d; fans as ``fan_in_and_fan_out``) from ``generator`` (None:
    the default generator)."""
    check_floating(tensor, "nn.init.xavier_normal_")
    fan_in, fan_out = fan_in_and_fan_out(tensor)
    if tensor.numel() == 0:
        return tensor
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), generator)


def kaiming_uniform_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """Samples U(-b, b) with b = gain * sqrt(3 / fan) into ``tensor`` (floating point, at least
    2-d) from ``generator`` (None: the default generator): gain = calculate_gain(nonlinearity,
    a), fan its fan_in or fan_out as ``mode`` says."""
    check_floating(tensor, "nn.init.kaiming_uniform_")
    gain, fan = calculate_gain(nonlinearity, a), _fan(tensor, mode)
    if tensor.numel() == 0:
        return tensor
    bound = gain * math.sqrt(3.0 / fan)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """Samples N(0, std**2) with std = gain / sqrt(fan) into ``tensor`` (floating point, at least
    2-d) from ``generator`` (None: the default generator): gain = calculate_gain(nonlinearity,
    a), fan its fan_in or fan_out as ``mode`` says."""
    check_floating(tensor, "nn.init.kaiming_normal_")
    gain, fan = calculate_gain(nonlinearity, a), _fan(tensor, mode)
    if tensor.numel() == 0:
        return tensor
    std = gain / math.sqrt(fan)
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor, gain=1.0, generator=None):
    """Fills ``tensor`` (floating point, at least 2-d) with a (semi-)orthogonal matrix times
    ``gain``, as PyTorch does (Saxe et al., 2013): viewed as a matrix [rows, cols] with rows =
    tensor.shape[0], its rows are orthonormal when rows <= cols, its columns otherwise. The
    matrix is the Q of the QR decomposition of a standard normal sample [rows, cols] (transposed
    when rows < cols) drawn from ``generator`` (None: the default generator, so
    ``kiln.manual_seed`` repeats it), with each column's sign made that of R's diagonal entry,
    which makes Q uniformly distributed (Mezzadri, 2007). The factorisation runs in NumPy, in
    float64; the sample is float32 (float64 for a float64 tensor), as ``normal_`` draws.

    A tensor of fewer than 2 dimensions is a KilnValueError, an integer one a DTypeError, a gain
    that is no real number a KilnTypeError; one with no elements is returned as it is."""
    check_floating(tensor, "nn.init.orthogonal_")
    if tensor.ndim < 2:
        raise KilnValueError(f"nn.init.orthogonal_: expected a tensor with at least 2 "
                             f"dimensions, got shape {list(tensor.shape)}")
    gain = check_real("nn.init.orthogonal_", "gain", gain)
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    sample = _mint.randn(rows, cols, generator=generator, dtype=sample_dtype(tensor))
    flat = sample.numpy().astype(np.float64)
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)  # LAPACK's Householder QR; q [max, min], r [min, min]
    # PyTorch multiplies by sign(diag(R)), which zeroes a column where R's entry is 0 (an event
    # of probability 0); +1 there keeps Q orthogonal.
    q *= np.where(np.diagonal(r) < 0, -1.0, 1.0)
    if rows < cols:
        q = q.T
    return _fill(tensor, _C.tensor(q.reshape(tensor.shape) * gain))


def eye_(tensor):
    """Fills the 2-d ``tensor`` (of any dtype) with the identity matrix: ones where the row and
    column indices are equal, zeros elsewhere (a rectangular one too), as torch.nn.init.eye_.
    A tensor of another rank is a ShapeError (a ValueError, as PyTorch raises), anything but a
    kiln tensor a KilnTypeError."""
    _kiln_tensor("nn.init.eye_", "tensor", tensor)
    if tensor.ndim != 2:
        raise ShapeError(f"nn.init.eye_: expected a 2-d tensor, got shape {_dims(tensor.shape)}")
    return _fill(tensor, _mint.eye(*tensor.shape, dtype=tensor.dtype))


def dirac_(tensor, groups=1):
    """Fills ``tensor``, a convolution's weight [out, in, *kernel] with 1 to 3 kernel dimensions,
    with the Dirac delta, as torch.nn.init.dirac_: zeros, and a 1 at the kernel's centre (index
    size // 2 in each kernel dimension) of weight[g * out / groups + d, d] for each group g and
    each d < min(out / groups, in), so that the convolution passes those input channels through
    unchanged. Any dtype. A tensor of fewer than 3 or more than 5 dimensions is a ShapeError,
    ``groups`` that is no positive int a KilnTypeError or KilnValueError, and an ``out`` not
    divisible by it a KilnValueError (ValueErrors, as PyTorch raises)."""
    owner = "nn.init.dirac_"
    _kiln_tensor(owner, "tensor", tensor)
    if tensor.ndim not in (3, 4, 5):
        raise ShapeError(f"{owner}: expected a tensor of 3, 4 or 5 dimensions (a convolution's "
                         f"weight [out, in, *kernel]), got shape {_dims(tensor.shape)}")
    groups = checked_int(owner, "groups", groups, low=1)
    out, channels, *kernel = tensor.shape
    if out % groups:
        raise KilnValueError(f"{owner}: expected dim 0 (size {out}) to be divisible by "
                             f"groups={groups}")
    if tensor.numel() == 0:
        return tensor
    per_group = out // groups
    values = np.zeros(tensor.shape)
    centre = tuple(size // 2 for size in kernel)
    for g in range(groups):
        for d in range(min(per_group, channels)):
            values[(g * per_group + d, d) + centre] = 1
    return _fill(tensor, _C.tensor(values).to(tensor.dtype))
