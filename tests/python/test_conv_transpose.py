"""kiln.mint.conv_transpose2d against a NumPy reference (scatter of each input pixel through the
kernel) over stride, padding, output_padding, groups and dilation, its gradients by finite
differences, and its argument errors."""

import numpy as np
import pytest

import kiln
from conftest import raises

mint = kiln.mint


def conv_transpose2d_reference(x, w, b, stride, padding, output_padding, groups, dilation):
    n, c_in, h, wd = x.shape
    _, c_out_g, kh, kw = w.shape
    c_out = c_out_g * groups
    h_out = (h - 1) * stride - 2 * padding + dilation * (kh - 1) + output_padding + 1
    w_out = (wd - 1) * stride - 2 * padding + dilation * (kw - 1) + output_padding + 1
    full = np.zeros((n, c_out, h_out + 2 * padding, w_out + 2 * padding))
    per_group = c_in // groups
    for ci in range(c_in):
        g = ci // per_group
        for i in range(h):
            for j in range(wd):
                for p in range(kh):
                    for q in range(kw):
                        full[:, g * c_out_g:(g + 1) * c_out_g, i * stride + p * dilation,
                             j * stride + q * dilation] += x[:, ci, i, j, None] * w[ci, :, p, q]
    out = full[:, :, padding:padding + h_out, padding:padding + w_out]
    return out + (0 if b is None else b[None, :, None, None])


CASES = [  # N, C_in, C_out, H, W, k, stride, padding, output_padding, groups, dilation
    (2, 4, 6, 5, 7, 3, 2, 1, 1, 2, 1),
    (1, 3, 2, 4, 4, 2, 2, 0, 0, 1, 1),
    (2, 2, 4, 3, 5, 3, 1, 1, 0, 1, 2),
    (1, 4, 4, 6, 6, 3, 3, 2, 2, 4, 1),
    (1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1),
    # output_padding at or past the stride, below the dilation: not the gradient of a conv.
    (1, 2, 3, 5, 4, 3, 1, 0, 1, 1, 2),
    (2, 2, 4, 4, 4, 2, 1, 2, 1, 2, 3),
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype, tol", [(kiln.float32, 1e-4), (kiln.float64, 1e-10)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_matches_the_reference(case, dtype, tol, with_bias, rng):
    n, c_in, c_out, h, w, k, s, p, op, g, d = case
    x = rng.standard_normal((n, c_in, h, w))
    weight = rng.standard_normal((c_in, c_out // g, k, k))
    bias = rng.standard_normal(c_out) if with_bias else None
    got = mint.conv_transpose2d(kiln.tensor(x, dtype=dtype), kiln.tensor(weight, dtype=dtype),
                                None if bias is None else kiln.tensor(bias, dtype=dtype), s, p,
                                op, g, d)
    want = conv_transpose2d_reference(x, weight, bias, s, p, op, g, d)
    assert got.dtype == dtype and got.shape == want.shape
    np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol * 10)


def test_gradients_match_finite_differences(rng):
    x = kiln.tensor(rng.standard_normal((1, 2, 3, 3)), requires_grad=True)
    w = kiln.tensor(rng.standard_normal((2, 3, 2, 2)), requires_grad=True)
    b = kiln.tensor(rng.standard_normal(3), requires_grad=True)
    assert kiln.testing.gradcheck(
        lambda x, w, b: mint.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
        (x, w, b))


@pytest.mark.parametrize("call, error, match", [
    (lambda x, w: mint.conv_transpose2d(x[0], w), kiln.ShapeError,
     r"expected x \[N, C_in, H, W\], got \[2, 3, 3\]"),
    (lambda x, w: mint.conv_transpose2d(x, w[:1]), kiln.ShapeError,
     r"expected weight \[C_in = 2, C_out / groups, kH, kW\], got \[1, 3, 2, 2\]"),
    (lambda x, w: mint.conv_transpose2d(x, w, output_padding=1), kiln.KilnValueError,
     "expected output_padding below stride or dilation, got 1"),
    (lambda x, w: mint.conv_transpose2d(x, w, stride=0), kiln.KilnValueError,
     "expected stride >= 1"),
    (lambda x, w: mint.conv_transpose2d(x, w, groups=0), kiln.KilnValueError,
     "expected groups >= 1, got 0"),
    (lambda x, w: mint.conv_transpose2d(x, w, padding=5), kiln.ShapeError,
     "the output would have size"),
    (lambda x, w: mint.conv_transpose2d(x, w, mint.zeros(4)), kiln.ShapeError,
     r"expected bias \[C_out = 3\], got \[4\]"),
    (lambda x, w: mint.conv_transpose2d(x, w, stride=(1, 2, 3)), kiln.KilnValueError,
     "expected stride as 2 values, got 3"),
])
def test_argument_errors(call, error, match):
    x, w = mint.ones(1, 2, 3, 3), mint.ones(2, 3, 2, 2)
    with raises(error, match=match):
        call(x, w)


def test_matches_pytorch(torch, rng):
    x = rng.standard_normal((2, 4, 5, 6)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    want = torch.nn.functional.conv_transpose2d(torch.tensor(x), torch.tensor(w), None, 2, 1,
                                                1, 1, 1)
    got = mint.conv_transpose2d(kiln.tensor(x), kiln.tensor(w), None, 2, 1, 1, 1, 1)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-4)
