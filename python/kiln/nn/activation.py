"""Activation cells with PyTorch's arguments, each applying the kiln.nn.functional function of its
name in lower case (``leaky_relu`` for LeakyReLU, ``log_softmax`` for LogSoftmax):

    ReLU(inplace=False)          ReLU6(inplace=False)          SiLU(inplace=False)
    Mish(inplace=False)          Hardswish(inplace=False)      Hardsigmoid(inplace=False)
    LeakyReLU(negative_slope=0.01, inplace=False)              ELU(alpha=1.0, inplace=False)
    Hardtanh(min_val=-1.0, max_val=1.0, inplace=False)
    PReLU(num_parameters=1, init=0.25, dtype=None)             GELU(approximate="none")
    Softplus(beta=1.0, threshold=20.0)                         Softmax(dim=-1)
    LogSoftmax(dim=-1)           Softmin(dim=-1)               GLU(dim=-1)
    SELU(inplace=False)          CELU(alpha=1.0, inplace=False)
    Threshold(threshold, value, inplace=False)                 LogSigmoid()
    Softsign()                   Tanhshrink()                  Tanh()
    Sigmoid()                    Identity()                    Softmax2d()
    Hardshrink(lambd=0.5)        Softshrink(lambd=0.5)
    RReLU(lower=1/8, upper=1/3, inplace=False)

``inplace`` (a bool, in PyTorch's position: ``ReLU(True)``, ``LeakyReLU(0.2, True)``) makes the
cell write its result into x and return x, as ``F.relu(x, inplace=True)`` does, except where
autograd needs x (it requires grad while grad mode is on, where F's inplace=True would copy x
first): there the cell computes out of place, and a network built with ``nn.ReLU(inplace=True)``
trains as PyTorch's does.

Softmax2d has no function of its name: it is softmax over the channels (dim -3) of a 3-d or 4-d
input.

Softmax's, LogSoftmax's and Softmin's ``dim`` defaults to -1, where PyTorch's None picks a
dimension from the input's rank with a deprecation warning.

``activation_cell(spec)`` turns None, a Cell, or one of those names in lower case ("relu",
"gelu", "leakyrelu", ...) into a cell (or None), for layers with an ``activation`` argument."""

import warnings

from .. import _C
from .._checks import checked_bool, checked_int
from ..errors import KilnValueError, ShapeError
from ..mint import _composite
from . import functional as F
from . import init
from ._layer_arguments import checked_tensor
from .cell import Cell
from .parameter import Parameter

__all__ = ["ReLU", "ReLU6", "GELU", "SiLU", "Mish", "Tanh", "Sigmoid", "Softmax", "LogSoftmax",
           "LeakyReLU", "ELU", "Softplus", "Hardtanh", "Hardswish", "Hardsigmoid", "PReLU",
           "Identity", "GLU", "SELU", "CELU", "LogSigmoid", "Softsign", "Tanhshrink", "Threshold",
           "Softmin", "Hardshrink", "Softshrink", "RReLU", "Softmax2d", "activation_cell"]

_mint = _C.mint


class _InPlace(Cell):
    """Base of the activations with PyTorch's ``inplace`` flag (a bool, else a KilnTypeError), which
    their repr shows when it is set, as PyTorch's does."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = checked_bool(type(self).__name__, "inplace", inplace)

    def _writes_into(self, x):
        return F._cell_writes_into(self.inplace, x)

    def _repr(self, *parts):
        return ", ".join(parts + (("inplace=True",) if self.inplace else ()))

    def extra_repr(self):
        return self._repr()


class ReLU(_InPlace):
    """ReLU(inplace=False): max(x, 0), element by element (F.relu)."""

    def construct(self, x):
        return F.relu(x, self._writes_into(x))


class GELU(Cell):
    """GELU(approximate="none"): x * Phi(x), with Phi the standard normal CDF; "tanh" uses
    PyTorch's tanh approximation (kiln.mint.gelu). Any other ``approximate`` is a
    KilnValueError."""

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise KilnValueError(f"GELU: approximate must be 'none' or 'tanh', got "
                                 f"{approximate!r}")
        self.approximate = approximate

    def construct(self, x):
        return _mint.gelu(x, self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class SiLU(_InPlace):
    """SiLU(inplace=False): x * sigmoid(x), element by element (F.silu)."""

    def construct(self, x):
        return F.silu(x, self._writes_into(x))


class Mish(_InPlace):
    """Mish(inplace=False): x * tanh(softplus(x)), element by element (F.mish)."""

    def construct(self, x):
        return F.mish(x, self._writes_into(x))


class Hardswish(_InPlace):
    """Hardswish(inplace=False): 0 for x <= -3, x * (x + 3) / 6 below 3, else x, with PyTorch's
    gradient (F.hardswish)."""

    def construct(self, x):
        return F.hardswish(x, self._writes_into(x))


class Hardsigmoid(_InPlace):
    """Hardsigmoid(inplace=False): x / 6 + 1/2 clamped to [0, 1], with PyTorch's gradient
    (F.hardsigmoid)."""

    def construct(self, x):
        return F.hardsigmoid(x, self._writes_into(x))


class Tanh(Cell):
    """Tanh(): tanh(x), element by element (kiln.mint.tanh)."""

    def construct(self, x):
        return _mint.tanh(x)


class Sigmoid(Cell):
    """Sigmoid(): 1 / (1 + exp(-x)), element by element (kiln.mint.sigmoid)."""

    def construct(self, x):
        return _mint.sigmoid(x)


class _AlongDim(Cell):
    """Base of Softmax, LogSoftmax and Softmin: a ``dim`` (default -1; an int, or None for
    PyTorch's implicit choice, with its deprecation warning), shown in the repr."""

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = None if dim is None else checked_int(type(self).__name__, "dim", dim)

    def _dim_for(self, x):
        if self.dim is not None:
            return self.dim
        # PyTorch's legacy rule (_get_softmax_dim): dim 0 for 0-, 1- and 3-d inputs, else 1.
        warnings.warn(f"{type(self).__name__}: implicit dimension choice (dim=None) is "
                      f"deprecated; pass dim", UserWarning, stacklevel=3)
        return 0 if x.ndim in (0, 1, 3) else 1

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmax(_AlongDim):
    """Softmax(dim=-1): exp(x) / sum(exp(x)) along ``dim`` (kiln.mint.softmax)."""

    def construct(self, x):
        return _mint.softmax(x, self._dim_for(x))


class LogSoftmax(_AlongDim):
    """LogSoftmax(dim=-1): log(softmax(x)) along ``dim``, computed without overflow
    (kiln.mint.log_softmax)."""

    def construct(self, x):
        return _mint.log_softmax(x, self._dim_for(x))


class Softmin(_AlongDim):
    """Softmin(dim=-1): softmax(-x) along ``dim`` (F.softmin)."""

    def construct(self, x):
        return F.softmin(x, self._dim_for(x))


class GLU(Cell):
    """GLU(dim=-1): a * sigmoid(b) for the halves a, b of the input along ``dim`` (an int), whose
    size must be even (F.glu; a ShapeError otherwise)."""

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = checked_int("GLU", "dim", dim)

    def construct(self, x):
        return F.glu(x, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class SELU(_InPlace):
    """SELU(inplace=False): scale * elu(x, alpha) with PyTorch's constants (F.selu)."""

    def construct(self, x):
        return F.selu(x, self._writes_into(x))


class CELU(_InPlace):
    """CELU(alpha=1.0, inplace=False): x where x > 0, else alpha * (exp(x / alpha) - 1) (F.celu;
    alpha = 0 is a KilnValueError when called, as in PyTorch)."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__(inplace)
        self.alpha = _composite.check_real("CELU", "alpha", alpha)

    def construct(self, x):
        return F.celu(x, self.alpha, self._writes_into(x))

    def extra_repr(self):
        return self._repr(f"alpha={self.alpha}")


class Threshold(_InPlace):
    """Threshold(threshold, value, inplace=False): ``value`` where x <= threshold, else x
    (F.threshold). Both are real numbers (a KilnTypeError otherwise), with no defaults, as in
    PyTorch."""

    def __init__(self, threshold, value, inplace=False):
        super().__init__(inplace)
        self.threshold = _composite.check_real("Threshold", "threshold", threshold)
        self.value = _composite.check_real("Threshold", "value", value)

    def construct(self, x):
        return F.threshold(x, self.threshold, self.value, self._writes_into(x))

    def extra_repr(self):
        return self._repr(f"threshold={self.threshold}, value={self.value}")


class LogSigmoid(Cell):
    """LogSigmoid(): log(sigmoid(x)), without overflow for large |x| (F.logsigmoid)."""

    def construct(self, x):
        return F.logsigmoid(x)


class Softsign(Cell):
    """Softsign(): x / (1 + |x|) (F.softsign)."""

    def construct(self, x):
        return F.softsign(x)


class Tanhshrink(Cell):
    """Tanhshrink(): x - tanh(x) (F.tanhshrink)."""

    def construct(self, x):
        return F.tanhshrink(x)


class LeakyReLU(_InPlace):
    """LeakyReLU(negative_slope=0.01, inplace=False): x where x > 0, else negative_slope * x
    (F.leaky_relu). A ``negative_slope`` that is no real number is a KilnTypeError."""

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__(inplace)
        self.negative_slope = _composite.check_real("LeakyReLU", "negative_slope", negative_slope)

    def construct(self, x):
        return F.leaky_relu(x, self.negative_slope, self._writes_into(x))

    def extra_repr(self):
        return self._repr(f"negative_slope={self.negative_slope}")


class ELU(_InPlace):
    """ELU(alpha=1.0, inplace=False): x where x > 0, else alpha * (exp(x) - 1) (F.elu)."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__(inplace)
        self.alpha = _composite.check_real("ELU", "alpha", alpha)

    def construct(self, x):
        return F.elu(x, self.alpha, self._writes_into(x))

    def extra_repr(self):
        return self._repr(f"alpha={self.alpha}")


class Softplus(Cell):
    """Softplus(beta=1.0, threshold=20.0): log(1 + exp(beta * x)) / beta, and x where
    beta * x > threshold (kiln.mint.softplus)."""

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta = _composite.check_real("Softplus", "beta", beta)
        self.threshold = _composite.check_real("Softplus", "threshold", threshold)

    def construct(self, x):
        return _composite.softplus(x, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class Hardtanh(_InPlace):
    """Hardtanh(min_val=-1.0, max_val=1.0, inplace=False): x clamped to [min_val, max_val], with
    PyTorch's gradient (0 at the ends; F.hardtanh). min_val > max_val is a KilnValueError."""

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__(inplace)
        self.min_val = _composite.check_real("Hardtanh", "min_val", min_val)
        self.max_val = _composite.check_real("Hardtanh", "max_val", max_val)
        if self.min_val > self.max_val:
            raise KilnValueError(f"Hardtanh: expected min_val <= max_val, got min_val={min_val} "
                                 f"and max_val={max_val}")

    def construct(self, x):
        return F.hardtanh(x, self.min_val, self.max_val, self._writes_into(x))

    def extra_repr(self):
        return self._repr(f"min_val={self.min_val}, max_val={self.max_val}")


class ReLU6(Hardtanh):
    """ReLU6(inplace=False): x clamped to [0, 6], a Hardtanh(0, 6) as in PyTorch (F.relu6)."""

    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)

    def construct(self, x):
        return F.relu6(x, self._writes_into(x))

    def extra_repr(self):
        return self._repr()


class PReLU(Cell):
    """PReLU(num_parameters=1, init=0.25, dtype=None): x where x > 0, else weight * x (F.prelu),
    with a learnable ``weight`` [num_parameters] of ``dtype`` (default: the default dtype) filled
    with ``init``: one slope for every element, or one per channel (dim 1 of the input, whose size
    must then be num_parameters)."""

    def __init__(self, num_parameters=1, init=0.25, dtype=None):
        super().__init__()
        self.num_parameters = checked_int("PReLU", "num_parameters", num_parameters, low=1)
        self.init = _composite.check_real("PReLU", "init", init)
        self.weight = Parameter(_mint.empty(self.num_parameters, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self):
        init.constant_(self.weight, self.init)

    def construct(self, x):
        return F.prelu(x, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class _Shrink(Cell):
    """Base of Hardshrink and Softshrink: a real ``lambd`` (a KilnTypeError otherwise), which the
    repr shows alone, as PyTorch's."""

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = _composite.check_real(type(self).__name__, "lambd", lambd)

    def extra_repr(self):
        return f"{self.lambd}"


class Hardshrink(_Shrink):
    """Hardshrink(lambd=0.5): x where |x| > lambd, else 0 (F.hardshrink)."""

    def construct(self, x):
        return F.hardshrink(x, self.lambd)


class Softshrink(_Shrink):
    """Softshrink(lambd=0.5): x - lambd above lambd, x + lambd below -lambd, else 0
    (F.softshrink; a negative or infinite lambd is its KilnValueError when called, as in
    PyTorch)."""

    def construct(self, x):
        return F.softshrink(x, self.lambd)


class RReLU(_InPlace):
    """RReLU(lower=1/8, upper=1/3, inplace=False): in training, x where x > 0, else x times a
    slope drawn from U(lower, upper) for each element; in eval mode the slope (lower + upper) /
    2 (F.rrelu with the cell's ``training``). Bounds that are no real numbers are a
    KilnTypeError, lower > upper a KilnValueError, when built (PyTorch refuses them when
    called)."""

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__(inplace)
        self.lower, self.upper = F._rrelu_bounds("RReLU", lower, upper)

    def construct(self, x):
        return F.rrelu(x, self.lower, self.upper, self.training, self._writes_into(x))

    def extra_repr(self):
        return self._repr(f"lower={self.lower}, upper={self.upper}")


class Softmax2d(Cell):
    """Softmax2d(): softmax over the channels (dim -3) of input [N, C, H, W] or [C, H, W]; another
    rank is a ShapeError, as PyTorch refuses it."""

    def construct(self, x):
        if checked_tensor("Softmax2d", "input", x).ndim not in (3, 4):
            raise ShapeError(f"Softmax2d: expected input to be 3D or 4D, got {x.ndim}D instead")
        return _mint.softmax(x, -3)


class Identity(Cell):
    """Identity(): returns its input (the same tensor)."""

    def construct(self, x):
        return x


_BY_NAME = {"relu": ReLU, "relu6": ReLU6, "gelu": GELU, "silu": SiLU, "mish": Mish, "tanh": Tanh,
            "sigmoid": Sigmoid, "softmax": Softmax, "logsoftmax": LogSoftmax,
            "leakyrelu": LeakyReLU, "elu": ELU, "softplus": Softplus, "hardtanh": Hardtanh,
            "hardswish": Hardswish, "hardsigmoid": Hardsigmoid, "prelu": PReLU,
            "identity": Identity, "glu": GLU, "selu": SELU, "celu": CELU, "logsigmoid": LogSigmoid,
            "softsign": Softsign, "tanhshrink": Tanhshrink, "softmin": Softmin,
            "hardshrink": Hardshrink, "softshrink": Softshrink, "rrelu": RReLU,
            "softmax2d": Softmax2d}


def activation_cell(spec):
    """None, a Cell, or an activation's name -> None or a Cell."""
    if spec is None or isinstance(spec, Cell):
        return spec
    if isinstance(spec, str) and spec.lower() in _BY_NAME:
        return _BY_NAME[spec.lower()]()
    raise KilnValueError(f"unknown activation {spec!r}; expected None, a Cell or one of "
                         f"{sorted(_BY_NAME)}")
