"""kiln.set_default_dtype / get_default_dtype (torch.set_default_dtype): the dtype of Python
floats made tensors, of the floating factories and layers given no dtype, and of the floating
results of integer inputs (a weak float scalar beside an integer tensor, true division, sin,
mean); tensors' own dtypes and the 16-bit compute type do not follow it. Checked against PyTorch
where it is installed. Every test that changes the default goes through the ``default_dtype``
fixture, which sets float32 back whatever the test does."""

import threading

import numpy as np
import pytest

import kiln
from conftest import raises
from kiln import mint, nn

FLOATING = [kiln.float64, kiln.float16, kiln.bfloat16, kiln.float32]


@pytest.fixture
def default_dtype():
    """Sets the default dtype (``default_dtype(kiln.float64)``) for one test; float32 comes back
    after it even when it fails, so no other test runs under another default."""
    try:
        yield kiln.set_default_dtype
    finally:
        kiln.set_default_dtype(kiln.float32)


@pytest.fixture
def both_defaults(torch):
    """Sets the default dtype of Kiln and of PyTorch together (by Kiln's dtype); both come back
    to float32 after the test."""
    def set_both(dtype):
        kiln.set_default_dtype(dtype)
        torch.set_default_dtype(getattr(torch, dtype.name))

    try:
        yield set_both
    finally:
        kiln.set_default_dtype(kiln.float32)
        torch.set_default_dtype(torch.float32)


def test_the_default_is_float32_and_set_default_dtype_changes_it(default_dtype):
    assert kiln.get_default_dtype() == kiln.float32
    for dtype in FLOATING:
        default_dtype(dtype)
        assert kiln.get_default_dtype() == dtype
    default_dtype("float64")  # any dtype spelling kiln takes
    assert kiln.get_default_dtype() == kiln.float64


@pytest.mark.parametrize("dtype", [kiln.int64, kiln.int8, kiln.uint8, kiln.bool_], ids=str)
def test_a_dtype_that_is_not_floating_point_is_a_type_error(default_dtype, dtype):
    default_dtype(kiln.float64)
    with raises(kiln.KilnTypeError, match="only floating-point types are supported as the "
                                         f"default type .*, got {dtype.name}"):
        kiln.set_default_dtype(dtype)
    assert kiln.get_default_dtype() == kiln.float64  # unchanged by the refused call


def test_an_unknown_dtype_is_a_dtype_error():
    with raises(kiln.DTypeError, match="unknown dtype 'float128'"):
        kiln.set_default_dtype("float128")
    assert kiln.get_default_dtype() == kiln.float32


def _factories():
    """(name, call) of every floating factory and layer given no dtype."""
    return [
        ("tensor of floats", lambda: kiln.tensor([1.5, 2.0])),
        ("tensor of one float", lambda: kiln.tensor(0.25)),
        ("nested tensor of floats", lambda: kiln.tensor([[1, 2.5], [3, 4]])),
        ("zeros", lambda: mint.zeros(2)),
        ("ones", lambda: mint.ones(2, 3)),
        ("empty", lambda: mint.empty(2)),
        ("full of a float", lambda: mint.full((2,), 1.5)),
        ("arange of floats", lambda: mint.arange(0.0, 1.0, 0.5)),
        ("linspace", lambda: mint.linspace(0, 1, 3)),
        ("eye", lambda: mint.eye(2)),
        ("rand", lambda: mint.rand(2)),
        ("randn", lambda: mint.randn(2)),
        ("scalar_tensor", lambda: mint.scalar_tensor(1)),
        ("logspace", lambda: mint.logspace(0, 1, 3)),
        ("normal of numbers", lambda: mint.normal(0.0, 1.0, (2,))),
        ("dtype=float", lambda: mint.zeros(2, dtype=float)),
        ("Linear", lambda: nn.Linear(2, 2).weight),
        ("Conv2d", lambda: nn.Conv2d(1, 1, 3).weight),
        ("Embedding", lambda: nn.Embedding(3, 2).weight),
        ("LayerNorm", lambda: nn.LayerNorm(2).weight),
        ("BatchNorm1d's running_mean", lambda: nn.BatchNorm1d(2).running_mean),
        ("LSTM", lambda: nn.LSTM(2, 3).weight_ih_l0),
        ("MultiheadAttention", lambda: nn.MultiheadAttention(4, 2).in_proj_weight),
        ("causal mask", lambda: nn.Transformer.generate_square_subsequent_mask(2)),
    ]


@pytest.mark.parametrize("dtype", [kiln.float64, kiln.float16, kiln.bfloat16], ids=str)
def test_floating_factories_and_layers_follow_the_default(default_dtype, dtype):
    default_dtype(dtype)
    for name, make in _factories():
        assert make().dtype == dtype, name


def test_factories_of_integers_and_given_dtypes_do_not_follow_it(default_dtype):
    default_dtype(kiln.float64)
    assert kiln.tensor([1, 2]).dtype == kiln.int64
    assert kiln.tensor([True]).dtype == kiln.bool_
    assert mint.arange(3).dtype == kiln.int64
    assert mint.full((2,), 1).dtype == kiln.int64
    assert mint.zeros(2, dtype=kiln.float32).dtype == kiln.float32
    assert nn.Linear(2, 2, dtype=kiln.float32).weight.dtype == kiln.float32
    assert kiln.tensor(np.array([0.5], np.float32)).dtype == kiln.float32  # an array keeps its own
    assert mint.zeros_like(kiln.tensor([1.0], dtype=kiln.float16)).dtype == kiln.float16


def test_python_floats_convert_once_to_the_default(default_dtype):
    default_dtype(kiln.float64)
    assert kiln.tensor([0.1]).tolist() == [0.1]  # every digit: no float32 on the way
    default_dtype(kiln.float16)
    assert kiln.tensor([0.1, 1e5]).numpy().tolist() == [np.float16(0.1), np.inf]
    default_dtype(kiln.bfloat16)
    assert kiln.tensor([0.1]).tolist() == kiln.tensor([0.1], dtype=kiln.bfloat16).tolist()


@pytest.mark.parametrize("dtype", [kiln.float64, kiln.float16, kiln.bfloat16], ids=str)
def test_integer_inputs_give_the_default_floating_dtype(default_dtype, dtype):
    default_dtype(dtype)
    i = kiln.tensor([1, 2, 4])
    results = {
        "int * 2.5": i * 2.5,
        "2.5 + int": 2.5 + i,
        "int / int": i / i,
        "sin": mint.sin(i),
        "mean": i.mean(),
        "var": mint.var(i),
        "std": mint.std(i),
        "logsumexp": mint.logsumexp(i, 0),
        "softmax": mint.softmax(i, 0),
        "clamp to a float bound": mint.clamp(i, 0.5),
        "bool * 0.5": kiln.tensor([True, False]) * 0.5,
        "logit": mint.logit(i),
        "sinc": mint.sinc(i),
    }
    for name, result in results.items():
        assert result.dtype == dtype, name
    np.testing.assert_allclose(results["int / int"].numpy().astype(np.float64), [1, 1, 1])
    np.testing.assert_allclose(results["mean"].numpy().astype(np.float64), 7 / 3, rtol=1e-2)


def test_floating_tensors_keep_their_dtype(default_dtype):
    default_dtype(kiln.float64)
    x = kiln.tensor([1.0, 2.0], dtype=kiln.float32)
    assert (x * 2.5).dtype == kiln.float32
    assert mint.sin(x).dtype == kiln.float32
    h = kiln.tensor([1.0], dtype=kiln.float16)
    assert (h / 3.0).dtype == kiln.float16
    assert (h + kiln.tensor([1.0], dtype=kiln.bfloat16)).dtype == kiln.float32  # the table's
    assert kiln.promote_types(kiln.int32, kiln.float16) == kiln.float16


def test_type_queries_follow_the_default(default_dtype):
    default_dtype(kiln.float64)
    assert mint.result_type(kiln.tensor([1]), 2.5) == kiln.float64
    assert mint.result_type(2.5, 1) == kiln.float64
    assert mint.result_type(kiln.tensor([1.0], dtype=kiln.float32), 2.5) == kiln.float32
    assert kiln.finfo().bits == 64
    assert kiln.distributions.Normal(0.0, 1.0).sample().dtype == kiln.float64


def test_optimizer_steps_count_in_float64_under_a_float64_default(default_dtype):
    default_dtype(kiln.float64)
    w = nn.Parameter(kiln.tensor([1.0, 2.0], dtype=kiln.float32))
    opt = kiln.optim.Adam([w])
    w.grad = kiln.tensor([1.0, 1.0], dtype=kiln.float32)
    opt.step()
    assert opt.state[w]["step"].dtype == kiln.float64  # PyTorch's _get_scalar_dtype
    assert w.dtype == kiln.float32


def test_the_default_is_process_wide(default_dtype):
    seen = []
    default_dtype(kiln.float64)
    thread = threading.Thread(target=lambda: seen.append((kiln.get_default_dtype(),
                                                          mint.zeros(1).dtype)))
    thread.start()
    thread.join()
    assert seen == [(kiln.float64, kiln.float64)]


def test_jit_traces_again_after_a_change_and_keeps_the_old_graph(default_dtype):
    traces = []

    @kiln.jit
    def scaled(x):
        traces.append(kiln.get_default_dtype())
        return x * 2.5 + mint.zeros(x.shape[0])

    i = kiln.tensor([1, 2])
    assert scaled(i).dtype == kiln.float32
    default_dtype(kiln.float64)
    result = scaled(i)
    assert result.dtype == kiln.float64  # as eager gives now
    assert result.tolist() == [2.5, 5.0]
    default_dtype(kiln.float32)
    assert scaled(i).dtype == kiln.float32  # the first graph, kept
    assert traces == [kiln.float32, kiln.float64]
    assert scaled.cache_info().size == 2


def _dtype_pairs(torch):
    """(name, kiln call, torch call) whose dtypes should agree under any default."""
    return [
        ("tensor", lambda: kiln.tensor([1.5]), lambda: torch.tensor([1.5])),
        ("tensor of ints", lambda: kiln.tensor([1, 2]), lambda: torch.tensor([1, 2])),
        ("zeros", lambda: mint.zeros(2), lambda: torch.zeros(2)),
        ("full", lambda: mint.full((2,), 0.5), lambda: torch.full((2,), 0.5)),
        ("arange", lambda: mint.arange(0.0, 1.0, 0.5), lambda: torch.arange(0.0, 1.0, 0.5)),
        ("linspace", lambda: mint.linspace(0, 1, 3), lambda: torch.linspace(0, 1, 3)),
        ("eye", lambda: mint.eye(2), lambda: torch.eye(2)),
        ("rand", lambda: mint.rand(2), lambda: torch.rand(2)),
        ("randn", lambda: mint.randn(2), lambda: torch.randn(2)),
        ("scalar_tensor", lambda: mint.scalar_tensor(1), lambda: torch.scalar_tensor(1)),
        ("logspace", lambda: mint.logspace(0, 1, 3), lambda: torch.logspace(0, 1, 3)),
        ("Linear", lambda: nn.Linear(2, 2).weight, lambda: torch.nn.Linear(2, 2).weight),
        ("Conv1d", lambda: nn.Conv1d(1, 1, 2).weight, lambda: torch.nn.Conv1d(1, 1, 2).weight),
        ("int * 2.5", lambda: kiln.tensor([1, 2]) * 2.5, lambda: torch.tensor([1, 2]) * 2.5),
        ("int / int", lambda: kiln.tensor([1]) / kiln.tensor([2]),
         lambda: torch.tensor([1]) / torch.tensor([2])),
        ("sin of int", lambda: mint.sin(kiln.tensor([1])), lambda: torch.sin(torch.tensor([1]))),
        ("float32 * 2.5", lambda: kiln.tensor([1.0], dtype=kiln.float32) * 2.5,
         lambda: torch.tensor([1.0], dtype=torch.float32) * 2.5),
        ("result_type", lambda: mint.result_type(kiln.tensor([1]), 2.5),
         lambda: torch.result_type(torch.tensor([1]), 2.5)),
    ]


@pytest.mark.parametrize("dtype", [kiln.float64, kiln.float16, kiln.bfloat16], ids=str)
def test_dtypes_match_pytorch(both_defaults, torch, dtype):
    both_defaults(dtype)
    for name, ours, theirs in _dtype_pairs(torch):
        got = ours()
        got = got if isinstance(got, kiln.dtype) else got.dtype
        want = theirs()
        want = want if isinstance(want, torch.dtype) else want.dtype
        assert got.name == str(want).removeprefix("torch."), name


def test_values_match_pytorch_under_float64(both_defaults, torch):
    both_defaults(kiln.float64)
    i, ti = kiln.tensor([1, 2, 7]), torch.tensor([1, 2, 7])
    np.testing.assert_array_equal((i / 3).numpy(), (ti / 3).numpy())
    np.testing.assert_array_equal((i * 0.1).numpy(), (ti * 0.1).numpy())
    np.testing.assert_array_equal(kiln.tensor([0.1, 1 / 3]).numpy(),
                                  torch.tensor([0.1, 1 / 3]).numpy())
