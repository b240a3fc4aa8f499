"""kiln.mint.max_pool2d_with_indices and avg_pool2d's divisor_override (src/ops/pool.cc's
MaxPool2DIndices and AvgPool2D's divisor_override attribute), checked against a NumPy scan of
each window and against PyTorch."""

import numpy as np
import pytest

import kiln
from kiln.errors import DTypeError, KilnTypeError, KilnValueError, ShapeError

from conftest import raises

# (kernel_size, stride, padding, dilation, ceil_mode)
GEOMETRIES = [
    (2, None, 0, 1, False),
    (3, 2, 1, 1, False),
    ((2, 3), (1, 2), (1, 1), 1, True),
    (2, 1, 1, (2, 1), False),
    (3, 3, 1, 1, True),
]


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def _out_size(size, k, s, p, d, ceil_mode):
    span = d * (k - 1) + 1
    room = size + 2 * p - span
    out = (room + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def numpy_max_pool_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode):
    """Each window scanned row by row: the first maximum, the last NaN (PyTorch's CPU rule)."""
    (kh, kw), (ph, pw), (dh, dw) = _pair(kernel_size), _pair(padding), _pair(dilation)
    sh, sw = _pair(kernel_size if stride is None else stride)
    n, c, h, w = x.shape
    oh, ow = (_out_size(h, kh, sh, ph, dh, ceil_mode), _out_size(w, kw, sw, pw, dw, ceil_mode))
    values = np.zeros((n, c, oh, ow), x.dtype)
    indices = np.zeros((n, c, oh, ow), np.int64)
    for b in range(n):
        for ch in range(c):
            for i in range(oh):
                for j in range(ow):
                    best, at = None, -1
                    for a in range(kh):
                        for e in range(kw):
                            r, q = i * sh - ph + a * dh, j * sw - pw + e * dw
                            if not (0 <= r < h and 0 <= q < w):
                                continue
                            v = x[b, ch, r, q]
                            if best is None or v > best or np.isnan(v):
                                best, at = v, r * w + q
                    values[b, ch, i, j], indices[b, ch, i, j] = best, at
    return values, indices


@pytest.mark.parametrize("geometry", GEOMETRIES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32", "uint8"])
def test_max_pool2d_with_indices_matches_a_scan_of_each_window(geometry, dtype):
    rng = np.random.default_rng(3)
    # Few distinct values, so that ties are common.
    x = rng.integers(0, 6, size=(2, 3, 7, 8)).astype(dtype)
    values, indices = kiln.mint.max_pool2d_with_indices(kiln.tensor(x), *geometry)
    want_values, want_indices = numpy_max_pool_with_indices(x, *geometry)
    assert indices.dtype == kiln.int64 and values.dtype == kiln.tensor(x).dtype
    np.testing.assert_array_equal(indices.numpy(), want_indices)
    np.testing.assert_array_equal(values.numpy(), want_values)
    np.testing.assert_array_equal(values.numpy(), kiln.mint.max_pool2d(kiln.tensor(x),
                                                                       *geometry).numpy())


def test_max_pool2d_with_indices_picks_the_last_nan():
    x = np.array([[[[1.0, np.nan], [np.nan, 2.0]]]], np.float32)
    values, indices = kiln.mint.max_pool2d_with_indices(kiln.tensor(x), 2)
    assert np.isnan(values.item()) and indices.item() == 2


@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_max_pool2d_with_indices_matches_torch(geometry, torch):
    x = np.random.default_rng(4).standard_normal((2, 3, 9, 7)).astype(np.float32)
    kernel_size, stride, padding, dilation, ceil_mode = geometry
    want_values, want_indices = torch.nn.functional.max_pool2d(
        torch.from_numpy(x), kernel_size, stride, padding, dilation, ceil_mode,
        return_indices=True)
    values, indices = kiln.mint.max_pool2d_with_indices(kiln.tensor(x), *geometry)
    np.testing.assert_array_equal(indices.numpy(), want_indices.numpy())
    np.testing.assert_array_equal(values.numpy(), want_values.numpy())


def test_max_pool2d_with_indices_values_carry_the_gradient():
    x = kiln.tensor(np.random.default_rng(5).standard_normal((1, 2, 6, 6)), requires_grad=True)
    values, indices = kiln.mint.max_pool2d_with_indices(x, 3, 2, 1)
    assert not indices.requires_grad
    values.sum().backward()
    want = np.zeros((1, 2, 36))
    for plane in range(2):
        np.add.at(want[0, plane], indices.numpy()[0, plane].ravel(), 1.0)
    np.testing.assert_array_equal(x.grad.numpy(), want.reshape(1, 2, 6, 6))


def test_max_pool2d_with_indices_errors():
    with raises(DTypeError, match="expected a numeric x, got bool"):
        kiln.mint.max_pool2d_with_indices(kiln.mint.zeros(1, 1, 2, 2, dtype=kiln.bool), 2)
    with raises(ShapeError, match=r"expected x of shape \[N, C, H, W\]"):
        kiln.mint.max_pool2d_with_indices(kiln.mint.zeros(2, 2), 2)
    with raises(KilnValueError, match="padding at most half the kernel size"):
        kiln.mint.max_pool2d_with_indices(kiln.mint.zeros(1, 1, 4, 4), 2, 2, 2)


def numpy_window_sums(x, k, s, p, ceil_mode):
    n, c, h, w = x.shape
    oh, ow = _out_size(h, k, s, p, 1, ceil_mode), _out_size(w, k, s, p, 1, ceil_mode)
    padded = np.pad(x, ((0, 0), (0, 0), (p, p + k), (p, p + k)))
    return np.stack([np.stack([padded[:, :, i * s:i * s + k, j * s:j * s + k].sum((2, 3))
                               for j in range(ow)], -1) for i in range(oh)], -2)


@pytest.mark.parametrize("divisor", [1, 5, -3])
@pytest.mark.parametrize("k,s,p,ceil_mode", [(2, 2, 0, False), (3, 2, 1, True), (3, 1, 1, False)])
@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool2d_divisor_override_divides_each_window_sum(divisor, k, s, p, ceil_mode,
                                                             count_include_pad):
    x = np.random.default_rng(6).standard_normal((2, 3, 7, 6))
    got = kiln.mint.avg_pool2d(kiln.tensor(x), k, s, p, ceil_mode, count_include_pad,
                               divisor_override=divisor)
    np.testing.assert_allclose(got.numpy(), numpy_window_sums(x, k, s, p, ceil_mode) / divisor,
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
def test_avg_pool2d_divisor_override_matches_torch_with_gradient(dtype, torch):
    x = np.random.default_rng(7).standard_normal((2, 3, 8, 9)).astype(np.float32)
    tx = torch.from_numpy(x).to(getattr(torch, dtype)).requires_grad_()
    kx = kiln.tensor(x).to(getattr(kiln, dtype)).detach().requires_grad_()
    want = torch.nn.functional.avg_pool2d(tx, 3, 2, 1, True, False, divisor_override=7)
    got = kiln.mint.avg_pool2d(kx, 3, 2, 1, True, False, divisor_override=7)
    g = np.random.default_rng(8).standard_normal(tuple(want.shape)).astype(np.float32)
    want.backward(torch.from_numpy(g).to(tx.dtype))
    got.backward(kiln.tensor(g).to(kx.dtype))
    tol = 1e-2 if dtype == "bfloat16" else 1e-6
    np.testing.assert_allclose(got.float().numpy(), want.float().detach().numpy(), rtol=tol,
                               atol=tol)
    np.testing.assert_allclose(kx.grad.float().numpy(), tx.grad.float().numpy(), rtol=tol,
                               atol=tol)


def test_avg_pool2d_divisor_override_errors_leave_none_behind():
    x = kiln.mint.ones(1, 1, 4, 4)
    with raises(KilnValueError, match="expected a nonzero divisor_override, got 0"):
        kiln.mint.avg_pool2d(x, 2, divisor_override=0)
    for bad in (2.5, True, "2"):
        with raises(KilnTypeError, match="expected divisor_override to be None or an int"):
            kiln.mint.avg_pool2d(x, 2, divisor_override=bad)
    assert kiln.mint.avg_pool2d(x, 2, divisor_override=None).tolist() == [[[[1.0, 1.0],
                                                                             [1.0, 1.0]]]]


def test_divisor_override_and_indices_trace_under_jit():
    @kiln.jit
    def f(x):
        values, indices = kiln.mint.max_pool2d_with_indices(x, 2, 1)
        return kiln.mint.avg_pool2d(values, 2, divisor_override=3), indices

    x = kiln.tensor(np.random.default_rng(9).standard_normal((1, 2, 5, 5)).astype(np.float32))
    got_avg, got_indices = f(x)
    values, indices = kiln.mint.max_pool2d_with_indices(x, 2, 1)
    np.testing.assert_array_equal(got_indices.numpy(), indices.numpy())
    np.testing.assert_allclose(got_avg.numpy(),
                               kiln.mint.avg_pool2d(values, 2, divisor_override=3).numpy(),
                               rtol=1e-6)
