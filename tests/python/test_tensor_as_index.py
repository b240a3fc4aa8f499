"""Tensor.__index__: a one-element integer tensor is an index for Python's sequences,
and a one-element integer tensor is an int to Kiln's int arguments, as in PyTorch; float and
bool tensors are refused where an int is taken, with a typed error (python/src/convert.h's
is_index)."""

import operator

import numpy as np
import pytest

import kiln
from kiln import mint

from conftest import raises


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "int64"])
def test_one_element_integer_tensors_index_python_sequences(dtype):
    three = kiln.tensor(np.array(3, dtype))
    assert operator.index(three) == 3 and type(operator.index(three)) is int
    assert list(range(three)) == [0, 1, 2]
    assert "abcd"[three] == "d"
    assert [10, 20, 30][kiln.tensor(np.array([1], dtype))] == 20  # one element, any rank
    assert [10, 20, 30][kiln.tensor(np.array([[2]], dtype))] == 30
    assert hex(kiln.tensor(np.array(3, dtype))) == "0x3"


def test_bool_tensors_are_no_index_and_no_int_argument():
    # PyTorch's are an index; Kiln's are not, so that no int argument takes True as 1.
    flag = kiln.tensor(True)
    with pytest.raises(kiln.KilnTypeError, match="got a bool tensor of shape"):
        ["no", "yes"][flag]
    x = mint.zeros(3, 4)
    for call in (lambda: mint.cat([x, x], flag), lambda: x.view(flag, -1),
                 lambda: x.repeat(flag, 2), lambda: x.transpose(flag, 0),
                 lambda: mint.chunk(x, flag), lambda: mint.unsqueeze(x, flag),
                 lambda: x.size(flag)):
        with raises(TypeError):
            call()
    assert x.shape == (3, 4)


@pytest.mark.parametrize("value", [np.array(1.0, np.float32), np.array([1, 2]),
                                   np.zeros((0,), np.int64)])
def test_index_refuses_float_and_many_element_tensors(value):
    with pytest.raises(kiln.KilnTypeError,
                       match="only integer tensors of a single element can be converted to an "
                             "index"):
        operator.index(kiln.tensor(value))
    with pytest.raises(TypeError):  # KilnTypeError is a TypeError: Python's protocols see one
        [1, 2, 3][kiln.tensor(value)]


def test_index_of_a_traced_tensor_is_refused_as_data_dependent():
    @kiln.jit
    def f(x, n):
        return x * len(range(n))

    with pytest.raises(kiln.KilnTypeError, match="data-dependent control flow on a traced value"):
        f(mint.ones(2), kiln.tensor(3))
    # Also where a Python-level check reads the int (not hidden by its own "must be an int").
    roll = kiln.jit(lambda x, s: mint.roll(x, s, 0))
    with pytest.raises(kiln.KilnTypeError, match="data-dependent control flow on a traced value"):
        roll(kiln.tensor([0.0, 1.0, 2.0]), kiln.tensor(1))
    assert mint.roll(kiln.tensor([0.0, 1.0, 2.0]), kiln.tensor(1), 0).tolist() == [2.0, 0.0, 1.0]


def test_integer_tensors_are_ints_to_kilns_int_arguments():
    x = mint.ones(2, 3)
    n = kiln.tensor(2)
    assert mint.zeros(kiln.tensor(3)).shape == (3,)
    assert mint.zeros(n, kiln.tensor(np.int32(4))).shape == (2, 4)
    assert x.sum(kiln.tensor(1)).shape == (2,)
    assert x.reshape(kiln.tensor(3), 2).shape == (3, 2)
    assert x.narrow(1, 0, n).shape == (2, 2)
    assert x.unsqueeze(kiln.tensor(0)).shape == (1, 2, 3)
    assert mint.cumsum(x, kiln.tensor(1)).tolist() == [[1, 2, 3], [1, 2, 3]]
    assert mint.randint(0, kiln.tensor(5), (4,)).shape == (4,)
    assert mint.max_pool2d(mint.ones(1, 1, 4, 4), kiln.tensor(2)).shape == (1, 1, 2, 2)


def test_tensors_stay_tensors_where_an_argument_takes_either():
    x = kiln.tensor([[1.0, -2.0], [3.0, -4.0]])
    # max(x, tensor) is the elementwise maximum, never max over dim 0.
    assert mint.max(x, kiln.tensor(0)).tolist() == [[1.0, 0.0], [3.0, 0.0]]
    # x[t] indexes by a tensor (a gather, traced by kiln.jit), not by a Python int.
    assert x[kiln.tensor(1)].tolist() == [3.0, -4.0]
    assert mint.clamp(x, kiln.tensor(0)).tolist() == [[1.0, 0.0], [3.0, 0.0]]
    assert (x + kiln.tensor(2)).tolist() == [[3.0, 0.0], [5.0, -2.0]]


def test_float_and_bool_tensors_are_refused_as_ints_with_typed_errors():
    x = mint.ones(2, 3)
    with raises(kiln.KilnTypeError, match=r"zeros: expected integer sizes, got tensor\(2\."):
        mint.zeros(kiln.tensor(2.0))
    with raises(kiln.KilnTypeError, match=r"zeros: expected integer sizes, got tensor\(True"):
        mint.zeros(kiln.tensor(True))
    with raises(kiln.KilnTypeError, match="sum: expected dim to be None, an int or a list"):
        x.sum(kiln.tensor(1.0))
    with raises(kiln.KilnTypeError, match="cumsum: expected dim to be an int"):
        mint.cumsum(x, kiln.tensor(True))
    with raises(kiln.KilnTypeError, match="reshape: expected an int or a sequence of ints"):
        x.reshape(kiln.tensor(3.0), 2)
    with raises(kiln.KilnTypeError, match="manual_seed: expected an int"):
        kiln.manual_seed(kiln.tensor(1.5))
    with raises(kiln.KilnTypeError, match="max_pool2d: kernel_size"):
        mint.max_pool2d(mint.ones(1, 1, 4, 4), kiln.tensor(2.0))
    assert x.tolist() == [[1.0] * 3] * 2  # the data is intact


def test_as_int_helper_refuses_bool_float_and_many_element_tensors():
    from kiln._checks import as_int
    assert as_int(kiln.tensor(4)) == 4
    assert as_int(kiln.tensor([4])) == 4
    assert as_int(kiln.tensor(True)) is None
    assert as_int(kiln.tensor(4.0)) is None
    assert as_int(kiln.tensor([4, 5])) is None


def test_repeat_takes_tensor_counts_and_names_itself_for_others():
    x = mint.ones(2)
    assert x.repeat(kiln.tensor(3)).shape == (6,)
    assert x.repeat(kiln.tensor([2, 3])).shape == (2, 6)
    with pytest.raises(kiln.KilnTypeError, match="repeat: expected int counts or one sequence"):
        x.repeat(kiln.tensor(2.0))
    with pytest.raises(kiln.KilnTypeError, match="repeat: expected int counts, got"):
        x.repeat(kiln.tensor([2.0]))
    with pytest.raises(kiln.KilnValueError, match="repeat: expected non-negative int counts"):
        x.repeat(-1)
