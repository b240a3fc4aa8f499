"""Activation cells: ``ReLU()``, ``GELU(approximate="none" | "tanh")``, ``SiLU()``, ``Tanh()``,
``Sigmoid()``, ``Softmax(dim=-1)``, and ``Identity()``; each applies the kiln.mint function of
the same name. ``activation_cell(spec)`` turns None, a Cell, or one of those names in lower case
("relu", "gelu", ...) into a cell (or None), for layers with an ``activation`` argument."""

from .. import _C
from ..errors import KilnValueError
from .cell import Cell

__all__ = ["ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Softmax", "Identity", "activation_cell"]

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


class Identity(Cell):
    """Identity(): returns its input (the same tensor)."""

    def construct(self, x):
        return x


_BY_NAME = {"relu": ReLU, "gelu": GELU, "silu": SiLU, "tanh": Tanh, "sigmoid": Sigmoid,
            "softmax": Softmax, "identity": Identity}


def activation_cell(spec):
    """None, a Cell, or an activation's name -> None or a Cell."""
    if spec is None or isinstance(spec, Cell):
        return spec
    if isinstance(spec, str) and spec.lower() in _BY_NAME:
        return _BY_NAME[spec.lower()]()
    raise KilnValueError(f"unknown activation {spec!r}; expected None, a Cell or one of "
                         f"{sorted(_BY_NAME)}")
