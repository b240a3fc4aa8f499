"""Binary elementwise ops as test_elementwise.py and test_operators.py check them: NumPy's
reference and Kiln's dtype rule per op, operands in each op's domain."""

import numpy as np

import kiln
from conftest import numpy_dtype, random_array

# name -> (NumPy reference, dtype rule). Rules: "promote" gives result_type (bool allowed),
# "nobool" too but rejects bool, "float" gives to_floating(result_type), "bool" gives bool.
BINARY = {
    "add": (np.add, "promote"),
    "sub": (np.subtract, "nobool"),
    "mul": (np.multiply, "promote"),
    "div": (np.true_divide, "float"),
    "floor_divide": (np.floor_divide, "nobool"),
    "remainder": (np.remainder, "nobool"),
    "pow": (np.power, "nobool"),
    "maximum": (np.maximum, "promote"),
    "minimum": (np.minimum, "promote"),
    "eq": (np.equal, "bool"),
    "ne": (np.not_equal, "bool"),
    "lt": (np.less, "bool"),
    "le": (np.less_equal, "bool"),
    "gt": (np.greater, "bool"),
    "ge": (np.greater_equal, "bool"),
    "logical_and": (np.logical_and, "bool"),
    "logical_or": (np.logical_or, "bool"),
    "logical_xor": (np.logical_xor, "bool"),
}


def to_floating(dtype):
    return dtype if dtype.is_floating_point else kiln.float32


def operand_dtype(rule, dtype):
    return to_floating(dtype) if rule == "float" else dtype


def binary_inputs(name, shape_a, shape_b, dtype, rng):
    """Operands in the op's domain; equal elements are mixed in to exercise comparisons."""
    a = random_array(shape_a, dtype, rng)
    b = random_array(shape_b, dtype, rng)
    if name in ("floor_divide", "remainder"):
        if dtype.is_floating_point:
            b = np.where(rng.random(shape_b) > 0.5, 1, -1).astype(b.dtype) * random_array(
                shape_b, dtype, rng, 0.5, 3.0)
        else:
            b = np.where(b == 0, 1, b).astype(b.dtype)
    elif name == "pow":
        if dtype.is_floating_point:
            a = random_array(shape_a, dtype, rng, 0.5, 3.0)
        else:
            b = random_array(shape_b, dtype, rng, 0.0, 0.5)  # exponents 0..5
    elif shape_a == shape_b and a.size:
        b = np.array(b)
        b.flat[::3] = a.flat[::3]
    return a, b


def binary_reference(name, a, b, dtype):
    ref, rule = BINARY[name]
    np_dtype = numpy_dtype(operand_dtype(rule, dtype))
    return ref(np.asarray(a).astype(np_dtype), np.asarray(b).astype(np_dtype))


def kt(array, dtype):
    return kiln.tensor(np.asarray(array), dtype=dtype)
