"""kiln.mint.linear_scan (src/ops/scan.cc's LinearScan: y[k] = a[k] * y[k - 1] + b[k]) against a
NumPy loop, its gradient by finite differences and under kiln.jit, and cumprod, which is one."""

import numpy as np
import pytest

import kiln
from conftest import raises
from kiln.testing import gradcheck

mint = kiln.mint


def numpy_linear_scan(a, b, dim, reverse):
    a, b = np.moveaxis(a.astype(np.float64), dim, 0), np.moveaxis(b.astype(np.float64), dim, 0)
    y, acc = np.empty_like(a), np.zeros(a.shape[1:])
    for k in (reversed(range(len(a))) if reverse else range(len(a))):
        acc = a[k] * acc + b[k]
        y[k] = acc
    return np.moveaxis(y, 0, dim)


@pytest.mark.parametrize("shape,dim", [((7,), 0), ((3, 9), 1), ((3, 9), 0), ((2, 5, 4), 1),
                                       ((2, 5, 4), -1), ((0, 3), 1), ((4, 0), 1)])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_linear_scan_matches_the_recurrence(shape, dim, reverse, dtype, rng):
    a = rng.uniform(-1.2, 1.2, shape).astype(dtype)
    b = rng.standard_normal(shape).astype(dtype)
    got = mint.linear_scan(kiln.tensor(a), kiln.tensor(b), dim, reverse=reverse)
    assert got.dtype == getattr(kiln, dtype) and got.shape == shape
    # Accumulated in float64 and rounded once: float32 results are the rounded exact ones.
    np.testing.assert_allclose(got.numpy(), numpy_linear_scan(a, b, dim, reverse).astype(dtype),
                               rtol=1e-6 if dtype == "float32" else 1e-13, atol=1e-30)


def test_linear_scan_of_16_bit_and_integer_operands():
    a = np.array([[1.5, -2.0, 0.5, 3.0]], np.float32)
    b = np.array([[1.0, 1.0, -1.0, 2.0]], np.float32)
    want = numpy_linear_scan(a, b, 1, False)
    half = mint.linear_scan(kiln.tensor(a).to(kiln.float16), kiln.tensor(b).to(kiln.bfloat16), 1)
    assert half.dtype == kiln.float32  # float16 with bfloat16 promotes to float32
    np.testing.assert_allclose(half.numpy(), want, rtol=1e-6)
    ints = mint.linear_scan(kiln.tensor([[2, 3, 4]], dtype=kiln.int32),
                            kiln.tensor([[1, 0, 5]], dtype=kiln.int32), 1)
    assert ints.dtype == kiln.int32 and ints.tolist() == [[1, 3, 17]]
    wraps = mint.linear_scan(kiln.tensor([100, 100], dtype=kiln.int8),
                             kiln.tensor([100, 0], dtype=kiln.int8), 0)
    assert wraps.tolist() == [100, np.int8(np.int64(100 * 100) % 256 - 256).item()]


def test_linear_scan_gradients_match_finite_differences_with_zeros_in_a(rng):
    a = rng.standard_normal((3, 6))
    a[0, 2] = a[1, 3] = a[1, 4] = 0.0
    b = rng.standard_normal((3, 6))
    for reverse in (False, True):
        assert gradcheck(lambda x, y: mint.linear_scan(x, y, 1, reverse=reverse),
                         (kiln.tensor(a).requires_grad_(), kiln.tensor(b).requires_grad_()))


def test_linear_scan_and_cumprod_of_0_d_tensors():
    a, b = kiln.tensor(2.0, requires_grad=True), kiln.tensor(3.0, requires_grad=True)
    y = mint.linear_scan(a, b, 0)  # y = a * 0 + b
    y.backward()
    assert y.item() == 3.0 and a.grad.item() == 0.0 and b.grad.item() == 1.0
    x = kiln.tensor(5.0, requires_grad=True)
    mint.cumprod(x, 0).backward()
    assert x.grad.item() == 1.0


@pytest.mark.parametrize("shape", [(3, 0), (0, 3), (1,), (2, 1)])
def test_linear_scan_gradients_of_empty_and_one_element_scans(shape):
    a = mint.ones(*shape, requires_grad=True)
    b = mint.ones(*shape, requires_grad=True)
    for dim in range(len(shape)):
        mint.sum(mint.linear_scan(a, b, dim)).backward()
        assert a.grad.shape == shape and b.grad.shape == shape
        a.grad = b.grad = None


def test_linear_scan_traces_under_jit(rng):
    a = kiln.tensor(rng.standard_normal((4, 5)).astype(np.float32))
    b = kiln.tensor(rng.standard_normal((4, 5)).astype(np.float32))

    @kiln.jit
    def f(x, y):
        return mint.linear_scan(x, y, 0, reverse=True) * 2

    np.testing.assert_array_equal(f(a, b).numpy(),
                                  (mint.linear_scan(a, b, 0, reverse=True) * 2).numpy())


def test_linear_scan_errors_leave_the_operands_intact():
    a = kiln.tensor([[1.0, 2.0]])
    with raises(kiln.ShapeError, match=r"linear_scan: expected a and b of one shape, got \[1, 2\] "
                                       r"and \[2\]"):
        mint.linear_scan(a, kiln.tensor([1.0, 2.0]), 1)
    with raises(kiln.KilnIndexError, match="linear_scan: dim"):
        mint.linear_scan(a, a, 2)
    with raises(kiln.DTypeError, match="expected numeric a and b, got bool"):
        mint.linear_scan(kiln.tensor([True]), kiln.tensor([False]), 0)
    assert a.tolist() == [[1.0, 2.0]]


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumprod_matches_torch_with_its_gradient_through_zeros(dim, rng, torch):
    x = rng.standard_normal((4, 6)) * 1.5
    x[1, 2] = x[2, 0] = x[2, 1] = 0.0
    x[3, 3] = -0.0
    kx = kiln.tensor(x).requires_grad_()
    tx = torch.tensor(x, requires_grad=True)
    got, want = mint.cumprod(kx, dim), torch.cumprod(tx, dim)
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    np.testing.assert_array_equal(np.signbit(got.detach().numpy()),
                                  np.signbit(want.detach().numpy()))
    g = rng.standard_normal(x.shape)
    got.backward(kiln.tensor(g))
    want.backward(torch.tensor(g))
    np.testing.assert_allclose(kx.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)
