"""kiln.mint.einsum's sublist form, ``einsum(op1, sublist1, op2, sublist2, ..., [sublist_out])``
(python/kiln/mint/_products.py): values against NumPy's sublist form and PyTorch's, Ellipsis,
the output sublist omitted, traces and diagonals, the int-to-letter order, gradients, the
operands as one list in the equation form, and every argument error with its message."""

import numpy as np
import pytest

import kiln
from conftest import raises, t
from kiln.testing import gradcheck

einsum = kiln.mint.einsum
E = Ellipsis

# (sublists, operand shapes): each sublist follows its operand; one more is the output's.
NUMPY_CASES = [
    ([[0, 1], [1, 2]], [(2, 3), (3, 4)]),
    ([[0, 1], [1, 2], [2, 0]], [(2, 3), (3, 4)]),
    ([[0, 1], [1, 2], [2, 3]], [(2, 3), (3, 4), (4, 2)]),
    ([[0, 1], [1, 2], [2, 3], [3, 0]], [(2, 3), (3, 4), (4, 2)]),
    ([[0], [1]], [(3,), (4,)]),
    ([[0], [0], []], [(5,), (5,)]),
    ([[0, 0]], [(4, 4)]),
    ([[0, 0], [0]], [(4, 4)]),
    ([[0, 1, 1], [1, 0]], [(2, 3, 3)]),
    ([[1, 0]], [(2, 3)]),
    ([[26, 25]], [(2, 3)]),  # 'a' after 'Z': the implicit output is [25, 26], a transpose
    ([[51, 0], [0, 1]], [(2, 3), (3, 4)]),  # the implicit output is [1, 51]
    ([[E, 0, 1], [E, 1, 2]], [(5, 2, 3), (5, 3, 4)]),
    ([[E, 0, 1], [E, 1, 2], [E, 2, 0]], [(5, 2, 3), (5, 3, 4)]),
    ([[0, E], [E]], [(2, 3, 4)]),
    ([[E, 0, 0], [0, E]], [(2, 3, 3)]),
    ([[E, 0, 1], [1], [E, 0]], [(2, 3), (3,)]),
]


def case_args(sublists, arrays, wrap):
    """The sublist form's arguments: each operand (through ``wrap``) followed by its sublist,
    then the output sublist when there is one."""
    args = []
    for array, sublist in zip(arrays, sublists):
        args += [wrap(array), sublist]
    return args + sublists[len(arrays):]


def case_id(case):
    return "-".join("".join("E" if s is E else str(s) for s in sub) or "()" for sub in case[0])


@pytest.mark.parametrize("sublists, shapes", NUMPY_CASES, ids=[case_id(c) for c in NUMPY_CASES])
def test_sublist_form_matches_numpy(sublists, shapes, rng):
    arrays = [rng.standard_normal(s) for s in shapes]
    got = einsum(*case_args(sublists, arrays, t))
    want = np.einsum(*case_args(sublists, arrays, np.asarray))
    assert got.shape == want.shape
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


def test_sublist_form_equals_its_equation(rng):
    a, b = t(rng.standard_normal((2, 3))), t(rng.standard_normal((3, 4)))
    np.testing.assert_array_equal(einsum(a, [0, 1], b, [1, 27], [27, 0]).numpy(),
                                  einsum("AB,Bb->bA", a, b).numpy())


def test_sublist_form_takes_tuples_and_numpy_ints(rng):
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((3, 4))
    got = einsum(t(a), (np.int64(0), np.int32(1)), t(b), (1, 2), (np.int8(2), 0))
    np.testing.assert_allclose(got.numpy(), (a @ b).T, rtol=1e-12)


def test_sublist_form_keeps_integer_dtypes_as_the_equation_form(rng):
    a = t(rng.integers(-5, 5, (3, 3)), kiln.int32)
    assert einsum(a, [0, 1], a, [1, 2]).dtype == einsum("ij,jk", a, a).dtype
    assert einsum(a, [0, 0]).dtype == einsum("ii", a).dtype


@pytest.mark.parametrize("operands", ["list", "tuple"])
def test_equation_form_takes_the_operands_as_one_sequence(operands, rng):
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((3, 4))
    pack = list if operands == "list" else tuple
    got = einsum("ij,jk->ki", pack([t(a), t(b)]))
    np.testing.assert_allclose(got.numpy(), (a @ b).T, rtol=1e-12)


def test_sublist_form_matches_torch(torch, rng):
    cases = [([[0, 1], [1, 2]], [(2, 3), (3, 4)]),
             ([[0, 1], [1, 2], [2, 0]], [(2, 3), (3, 4)]),
             ([[E, 0, 1], [E, 1, 2]], [(5, 2, 3), (5, 3, 4)]),
             ([[E, 0, 0], [0, E]], [(2, 3, 3)]),
             ([[0, 0]], [(4, 4)]),
             ([[26, 25, 51]], [(2, 3, 4)]),
             ([[0, 1], [0, 1], []], [(2, 3), (2, 3)]),
             ([[0, E], [0]], [(2, 3, 4)])]  # '...' summed: PyTorch's rule, not NumPy's
    for sublists, shapes in cases:
        arrays = [rng.standard_normal(s) for s in shapes]
        want = torch.einsum(*case_args(sublists, arrays, torch.tensor)).numpy()
        got = einsum(*case_args(sublists, arrays, t))
        assert got.shape == want.shape, sublists
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


def test_sublist_form_gradients_match_torch(torch, rng):
    arrays = [rng.standard_normal(s) for s in ((5, 2, 3), (5, 3, 4))]
    sublists = [[E, 0, 1], [E, 1, 2], [E, 2, 0]]
    ours = [t(a).requires_grad_() for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    kiln.mint.sum(einsum(*case_args(sublists, ours, lambda x: x)) ** 2).backward()
    (torch.einsum(*case_args(sublists, theirs, lambda x: x)) ** 2).sum().backward()
    for mine, other in zip(ours, theirs):
        np.testing.assert_allclose(mine.grad.numpy(), other.grad.numpy(), rtol=1e-10,
                                   atol=1e-12)


GRADIENT_CASES = [
    ([[0, 1], [1, 2]], [(2, 3), (3, 2)]),
    ([[0, 1], [1, 2], [2, 3], [3, 0]], [(2, 3), (3, 2), (2, 2)]),
    ([[0, 0]], [(3, 3)]),
    ([[0, 0, 1], [1, 0]], [(3, 3, 2)]),
    ([[E, 0, 1], [E, 1, 2]], [(2, 2, 3), (2, 3, 2)]),
]


@pytest.mark.parametrize("sublists, shapes", GRADIENT_CASES,
                         ids=[case_id(c) for c in GRADIENT_CASES])
def test_sublist_form_gradients_match_finite_differences(sublists, shapes, rng):
    leaves = [t(rng.standard_normal(s)).requires_grad_() for s in shapes]

    def function(*xs):
        return einsum(*case_args(sublists, xs, lambda x: x))

    assert gradcheck(function, leaves)


def ones(*shape):
    return kiln.mint.ones(*shape)


ERROR_CASES = [
    ("52", lambda: einsum(ones(2), [52]), kiln.KilnValueError,
     r"subscripts of the sublist of operand 0 to be in \[0, 52\), got 52 in \[52\]"),
    ("negative", lambda: einsum(ones(2), [0], ones(2), [-1]), kiln.KilnValueError,
     r"sublist of operand 1 to be in \[0, 52\), got -1"),
    ("output 52", lambda: einsum(ones(2), [0], [52]), kiln.KilnValueError,
     r"subscripts of the output sublist to be in \[0, 52\), got 52"),
    ("float", lambda: einsum(ones(2, 2), [0, 1.0]), kiln.KilnTypeError,
     r"sublist of operand 0 to hold ints in \[0, 52\) and Ellipsis, got float 1.0"),
    ("bool", lambda: einsum(ones(2), [True]), kiln.KilnTypeError,
     "sublist of operand 0 to hold ints.*got bool True"),
    ("str label", lambda: einsum(ones(2), ["i"]), kiln.KilnTypeError,
     "sublist of operand 0 to hold ints.*got str 'i'"),
    ("None label", lambda: einsum(ones(2), [0], [None]), kiln.KilnTypeError,
     "output sublist to hold ints.*got NoneType None"),
    ("str sublist", lambda: einsum(ones(2), "i"), kiln.KilnTypeError,
     r"sublist of operand 0 to be a list of ints in \[0, 52\) and Ellipsis, got str 'i'"),
    ("odd count", lambda: einsum(ones(2), [0], ones(2)), kiln.KilnTypeError,
     r"operand 1 has no sublist; expected einsum\(op1, sublist1, op2, sublist2, \.\.\., "
     r"\[sublist_out\]\) in the sublist form, got 3 argument"),
    ("no sublist", lambda: einsum(ones(2)), kiln.KilnTypeError,
     "operand 0 has no sublist.*got 1 argument"),
    ("list operand", lambda: einsum(ones(2), [0], [1.0, 2.0], [0]), kiln.KilnTypeError,
     "operand 1 to be a kiln.Tensor, got list"),
    ("rank", lambda: einsum(ones(2, 3), [0]), kiln.ShapeError,
     r"operand 0 has 1 subscript\(s\) in the equation but 2 dimension"),
    ("two ellipses", lambda: einsum(ones(2, 3), [E, 0, E]), kiln.KilnValueError,
     "more than one ellipsis"),
    ("output repeated", lambda: einsum(ones(2), [0], [0, 0]), kiln.KilnValueError,
     "output subscript 'A' appears more than once in 'A->AA'"),
    ("output unknown", lambda: einsum(ones(2), [0], [1]), kiln.KilnValueError,
     "output subscript 'B' does not appear in any operand of 'A->B'"),
    ("sizes", lambda: einsum(ones(2), [0], ones(3), [0]), kiln.ShapeError,
     "size 3 in operand 1.*size 2"),
    ("not a tensor or str", lambda: einsum(3, [0]), kiln.KilnTypeError,
     "equation to be a str.*got int"),
]


@pytest.mark.parametrize("call, error, match", [c[1:] for c in ERROR_CASES],
                         ids=[c[0] for c in ERROR_CASES])
def test_sublist_form_errors(call, error, match):
    with raises(error, match=match):
        call()


def test_sublists_may_be_ranges_and_numpy_vectors():
    a = np.arange(6.0).reshape(2, 3)
    b = np.arange(12.0).reshape(3, 4)
    want = a @ b
    got = kiln.mint.einsum(kiln.tensor(a), range(2), kiln.tensor(b), np.array([1, 2]), [0, 2])
    np.testing.assert_allclose(got.numpy(), want)
