"""Activation cells: ``ReLU()``, ``GELU(approximate="none" | "tanh")``, ``SiLU()``, ``Tanh()``,
``Sigmoid()``, ``Softmax(dim=-1)``, ``LeakyReLU(negative_slope=0.01)``, ``ELU(alpha=1.0)``,
``Softplus(beta=1.0, threshold=20.0)``, ``Hardtanh(min_val=-1.0, max_val=1.0)`` and
``Identity()``; each applies the kiln.mint function of the same name in lower case
(``leaky_relu`` for LeakyReLU). ``activation_cell(spec)`` turns None, a Cell, or one of those
names in lower case ("relu", "gelu", "leakyrelu", ...) into a cell (or None), for layers with an
``activation`` argument."""

from .. import _C
from ..errors import KilnValueError
from ..mint import _composite
from .cell import Cell

__all__ = ["ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Softmax", "LeakyReLU", "ELU", "Softplus",
           "Hardtanh", "Identity", "activation_cell"]

_mint = _C.mint


class ReLU(Cell):
    """ReLU(): max(x, 0), element by element (kiln.mint.relu)."""

    def construct(self, x):
        return _mint.relu(x)


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


class SiLU(Cell):
    """SiLU(): x * sigmoid(x), element by element (kiln.mint.silu)."""

    def construct(self, x):
        return _mint.silu(x)


class Tanh(Cell):
    """Tanh(): tanh(x), element by element (kiln.mint.tanh)."""

    def construct(self, x):
        return _mint.tanh(x)


class Sigmoid(Cell):
    """Sigmoid(): 1 / (1 + exp(-x)), element by element (kiln.mint.sigmoid)."""

    def construct(self, x):
        return _mint.sigmoid(x)


class Softmax(Cell):
    """Softmax(dim=-1): exp(x) / sum(exp(x)) along ``dim`` (kiln.mint.softmax)."""

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def construct(self, x):
        return _mint.softmax(x, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LeakyReLU(Cell):
    """LeakyReLU(negative_slope=0.01): x where x > 0, else negative_slope * x
    (kiln.mint.leaky_relu). A ``negative_slope`` that is no real number is a KilnTypeError."""

    def __init__(self, negative_slope=0.01):
        super().__init__()
        self.negative_slope = _composite.check_real("LeakyReLU", "negative_slope", negative_slope)

    def construct(self, x):
        return _composite.leaky_relu(x, self.negative_slope)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}"


class ELU(Cell):
    """ELU(alpha=1.0): x where x > 0, else alpha * (exp(x) - 1) (kiln.mint.elu)."""

    def __init__(self, alpha=1.0):
        super().__init__()
        self.alpha = _composite.check_real("ELU", "alpha", alpha)

    def construct(self, x):
        return _composite.elu(x, self.alpha)

    def extra_repr(self):
        return f"alpha={self.alpha}"


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


class Hardtanh(Cell):
    """Hardtanh(min_val=-1.0, max_val=1.0): x clamped to [min_val, max_val], with PyTorch's
    gradient (0 at the ends; kiln.mint.hardtanh). min_val > max_val is a KilnValueError."""

    def __init__(self, min_val=-1.0, max_val=1.0):
        super().__init__()
        self.min_val = _composite.check_real("Hardtanh", "min_val", min_val)
        self.max_val = _composite.check_real("Hardtanh", "max_val", max_val)
        if self.min_val > self.max_val:
            raise KilnValueError(f"Hardtanh: expected min_val <= max_val, got min_val={min_val} "
                                 f"and max_val={max_val}")

    def construct(self, x):
        return _composite.hardtanh(x, self.min_val, self.max_val)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}"


class Identity(Cell):
    """Identity(): returns its input (the same tensor)."""

    def construct(self, x):
        return x


_BY_NAME = {"relu": ReLU, "gelu": GELU, "silu": SiLU, "tanh": Tanh, "sigmoid": Sigmoid,
            "softmax": Softmax, "leakyrelu": LeakyReLU, "elu": ELU, "softplus": Softplus,
            "hardtanh": Hardtanh, "identity": Identity}


def activation_cell(spec):
    """None, a Cell, or an activation's name -> None or a Cell."""
    if spec is None or isinstance(spec, Cell):
        return spec
    if isinstance(spec, str) and spec.lower() in _BY_NAME:
        return _BY_NAME[spec.lower()]()
    raise KilnValueError(f"unknown activation {spec!r}; expected None, a Cell or one of "
                         f"{sorted(_BY_NAME)}")
