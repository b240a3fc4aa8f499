"""kiln.mint matrix products, convolution, pooling, normalisation and embedding against NumPy
references (written here, following PyTorch's definitions), plus every error path. The losses are
in test_losses.py."""

import numpy as np
import pytest

import kiln
from conftest import FLOAT_DTYPES, INT_DTYPES, TOLERANCES, numpy_dtype, raises, random_array

mint = kiln.mint

# Reduced-precision results are rounded once from a float32 computation; float32 products
# accumulate k rounding errors, so their tolerance grows with the magnitude of the result.
PRODUCT_RTOL = {kiln.float64: 1e-12, kiln.float32: 1e-4, kiln.float16: 2e-3, kiln.bfloat16: 1.6e-2}


def t(array, dtype=None):
    return kiln.tensor(array, dtype=dtype)


def check_product(actual, expected, dtype):
    """Compares a floating result against a float64 NumPy reference, with an absolute tolerance
    scaled by the size of the result (sums of k terms cancel)."""
    a = actual.numpy().astype(np.float64)
    e = np.asarray(expected, dtype=np.float64)
    assert a.shape == e.shape, f"shape {a.shape} != expected {e.shape}"
    rtol = PRODUCT_RTOL[dtype]
    scale = max(1.0, float(np.abs(e).max())) if e.size else 1.0
    np.testing.assert_allclose(a, e, rtol=rtol, atol=rtol * scale)


def f64(array):
    return np.asarray(array, dtype=np.float64)


# ---------------------------------------------------------------------------------------------
# matmul, bmm, linear, addmm

MATMUL_SHAPES = [
    ((3,), (3,)),
    ((3,), (3, 4)),
    ((2, 3), (3,)),
    ((2, 3), (3, 4)),
    ((5, 2, 3), (3, 4)),
    ((2, 3), (5, 3, 4)),
    ((5, 2, 3), (5, 3, 4)),
    ((1, 2, 3), (5, 3, 4)),
    ((4,), (2, 4, 3)),
    ((2, 3, 4), (4,)),
    ((2, 1, 2, 3), (3, 3, 4)),
    ((2, 1, 4, 3), (1, 5, 3, 2)),
    ((3, 2, 2, 5), (3, 2, 5, 1)),
    ((0, 3), (3, 4)),
    ((2, 0), (0, 4)),
    ((0, 2, 3), (3, 2)),
]


@pytest.mark.parametrize("a_shape, b_shape", MATMUL_SHAPES, ids=str)
def test_matmul_follows_numpy_shapes_and_broadcasting(a_shape, b_shape, rng):
    a = random_array(a_shape, kiln.float32, rng)
    b = random_array(b_shape, kiln.float32, rng)
    out = mint.matmul(t(a), t(b))
    assert out.dtype == kiln.float32
    check_product(out, np.matmul(f64(a), f64(b)), kiln.float32)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("k", [1, 17, 256])
def test_matmul_float_dtypes(dtype, k, rng):
    a = random_array((3, 5, k), dtype, rng, -1, 1)
    b = random_array((1, k, 7), dtype, rng, -1, 1)
    out = mint.matmul(t(a, dtype), t(b, dtype))
    assert out.dtype == dtype
    check_product(out, np.matmul(f64(a), f64(b)), dtype)


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: d.name)
def test_matmul_integer_dtypes_wrap_like_numpy(dtype, rng):
    a = random_array((2, 4, 6), dtype, rng)
    b = random_array((6, 3), dtype, rng)
    out = mint.matmul(t(a, dtype), t(b, dtype))
    assert out.dtype == dtype
    np.testing.assert_array_equal(out.numpy(), np.matmul(a, b))


def test_matmul_bool_is_logical_or_of_and(rng):
    a = rng.random((3, 4)) > 0.5
    b = rng.random((4, 2)) > 0.5
    out = mint.matmul(t(a), t(b))
    assert out.dtype == kiln.bool_
    np.testing.assert_array_equal(out.numpy(), np.matmul(a, b))


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.int32], ids=lambda d: d.name)
def test_matmul_non_contiguous_operands(dtype, rng):
    a = random_array((4, 6, 5), dtype, rng)  # used as a.transpose(1, 2): [4, 5, 6]
    b = random_array((6, 14), dtype, rng)  # used as b[:, ::2]: [6, 7], no unit stride
    c = random_array((3, 6), dtype, rng)  # used as c.T: [6, 3], column-major
    ka, kb, kc = t(a, dtype).transpose(1, 2), t(b, dtype).slice(1, 0, 14, 2), t(c, dtype).T
    assert not (ka.is_contiguous() or kb.is_contiguous() or kc.is_contiguous())
    na, nb, nc = a.transpose(0, 2, 1), b[:, ::2], c.T
    if dtype.is_floating_point:
        check_product(mint.matmul(ka, kb), np.matmul(f64(na), f64(nb)), dtype)
        check_product(mint.matmul(ka, kc), np.matmul(f64(na), f64(nc)), dtype)
        check_product(mint.matmul(kc.T, ka.transpose(1, 2)), np.matmul(f64(c), f64(a)), dtype)
    else:
        np.testing.assert_array_equal(mint.matmul(ka, kb).numpy(), np.matmul(na, nb))
        np.testing.assert_array_equal(mint.matmul(ka, kc).numpy(), np.matmul(na, nc))


def test_matmul_of_batches_of_every_other_row(rng):
    # Strides oneDNN cannot describe (the matrices interleave): copied first, eager and jitted.
    a = random_array((2, 3, 4), kiln.float32, rng)
    b = random_array((4, 5), kiln.float32, rng)
    expected = np.matmul(f64(a[:, ::2]), f64(b))
    check_product(t(a)[:, ::2] @ t(b), expected, kiln.float32)
    check_product(kiln.jit(lambda x, y: x[:, ::2] @ y)(t(a), t(b)), expected, kiln.float32)
    batched = np.broadcast_to(f64(b), (2, 4, 5))
    check_product(mint.bmm(t(a)[:, ::2], t(b).expand(2, 4, 5)), np.matmul(f64(a[:, ::2]), batched),
                  kiln.float32)


def test_matmul_expanded_batch_operands(rng):
    a = random_array((1, 3, 4), kiln.float32, rng)
    b = random_array((4, 2), kiln.float32, rng)
    ka = t(a).expand(5, 3, 4)
    kb = t(b).unsqueeze(0).expand(5, 4, 2)
    expected = np.matmul(np.broadcast_to(f64(a), (5, 3, 4)), f64(b))
    check_product(mint.matmul(ka, kb), expected, kiln.float32)
    check_product(mint.matmul(ka, t(b)), expected, kiln.float32)


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64])
@pytest.mark.parametrize("a_shape, a_expand, b_shape, b_expand", [
    ((3, 4), None, (1, 4, 2), (5, 4, 2)),  # only the right operand is expanded
    ((1, 3, 4), None, (1, 4, 2), (5, 4, 2)),  # beside a batch of one
    ((1, 1, 3, 4), (5, 1, 3, 4), (1, 1, 4, 2), (1, 6, 4, 2)),  # each along its own dim
])
def test_matmul_expanded_beside_unit_batch(dtype, a_shape, a_expand, b_shape, b_expand, rng):
    a, b = random_array(a_shape, dtype, rng), random_array(b_shape, dtype, rng)
    ka, kb = t(a), t(b)
    if a_expand:
        ka, a = ka.expand(*a_expand), np.broadcast_to(a, a_expand)
    kb, b = kb.expand(*b_expand), np.broadcast_to(b, b_expand)
    check_product(mint.matmul(ka, kb), np.matmul(f64(a), f64(b)), dtype)


def test_matmul_promotes_mixed_dtypes(rng):
    a = random_array((2, 3), kiln.int32, rng)
    b = random_array((3, 2), kiln.float32, rng)
    out = mint.matmul(t(a), t(b))
    assert out.dtype == kiln.float32
    check_product(out, np.matmul(f64(a), f64(b)), kiln.float32)
    assert mint.matmul(t(b.T), t(b.astype(np.float64))).dtype == kiln.float64


def test_matmul_operator_and_method(rng):
    a = random_array((2, 3), kiln.float32, rng)
    b = random_array((3, 4), kiln.float32, rng)
    expected = np.matmul(f64(a), f64(b))
    check_product(t(a) @ t(b), expected, kiln.float32)
    check_product(t(a).matmul(t(b)), expected, kiln.float32)
    check_product(t(a) @ b, expected, kiln.float32)  # a NumPy operand converts
    check_product(t(b).__rmatmul__(a), expected, kiln.float32)
    with raises(TypeError):
        t(a) @ "not a tensor"


def test_bmm(rng):
    a = random_array((3, 2, 5), kiln.float32, rng)
    b = random_array((3, 5, 4), kiln.float32, rng)
    check_product(mint.bmm(t(a), t(b)), np.matmul(f64(a), f64(b)), kiln.float32)
    check_product(mint.bmm(t(a), t(b).transpose(1, 2).contiguous().transpose(1, 2)),
                  np.matmul(f64(a), f64(b)), kiln.float32)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("x_shape", [(6,), (4, 6), (2, 3, 6)], ids=str)
@pytest.mark.parametrize("with_bias", [True, False])
def test_linear(dtype, x_shape, with_bias, rng):
    x = random_array(x_shape, dtype, rng, -1, 1)
    w = random_array((5, 6), dtype, rng, -1, 1)
    b = random_array((5,), dtype, rng, -1, 1)
    out = mint.linear(t(x, dtype), t(w, dtype), t(b, dtype) if with_bias else None)
    assert out.dtype == dtype
    expected = f64(x) @ f64(w).T + (f64(b) if with_bias else 0)
    check_product(out, expected, dtype)


def test_linear_with_non_contiguous_weight(rng):
    x = random_array((3, 4), kiln.float32, rng)
    w = random_array((4, 5), kiln.float32, rng)  # weight is w.T: [5, 4]
    b = random_array((5,), kiln.float32, rng)
    check_product(mint.linear(t(x), t(w).T, t(b)), f64(x) @ f64(w) + f64(b), kiln.float32)
    check_product(mint.linear(t(x).T.contiguous().T, t(w).T), f64(x) @ f64(w), kiln.float32)


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.bfloat16],
                         ids=lambda d: d.name)
@pytest.mark.parametrize("bias_shape", [(3, 4), (4,), (3, 1), ()], ids=str)
def test_addmm(dtype, bias_shape, rng):
    bias = random_array(bias_shape, dtype, rng, -1, 1)
    a = random_array((3, 5), dtype, rng, -1, 1)
    b = random_array((5, 4), dtype, rng, -1, 1)
    out = mint.addmm(t(bias, dtype), t(a, dtype), t(b, dtype), beta=0.5, alpha=-2.0)
    assert out.dtype == dtype
    check_product(out, 0.5 * f64(bias) - 2.0 * (f64(a) @ f64(b)), dtype)


def test_addmm_beta_zero_ignores_bias_and_integers_work(rng):
    a = random_array((2, 3), kiln.float32, rng)
    b = random_array((3, 2), kiln.float32, rng)
    nan_bias = np.full((2, 2), np.nan, np.float32)
    out = mint.addmm(t(nan_bias), t(a), t(b), beta=0.0)
    check_product(out, f64(a) @ f64(b), kiln.float32)
    ai = random_array((2, 3), kiln.int64, rng)
    bi = random_array((3, 2), kiln.int64, rng)
    ci = random_array((2,), kiln.int64, rng)
    out = mint.addmm(t(ci), t(ai), t(bi), beta=2, alpha=3)
    np.testing.assert_array_equal(out.numpy(), 2 * ci + 3 * (ai @ bi))


@pytest.mark.parametrize("call, error, message", [
    (lambda: mint.matmul(t(np.zeros((2, 3))), t(np.zeros((4, 5)))), kiln.ShapeError,
     r"^matmul: a has shape \[2, 3\] and b has shape \[4, 5\]; expected a.shape\[-1\] == "
     r"b.shape\[-2\], got 3 and 4"),
    (lambda: mint.matmul(t(np.zeros((2, 3))), t(np.zeros(4))), kiln.ShapeError,
     r"expected a.shape\[-1\] == b.shape\[0\], got 3 and 4"),
    (lambda: mint.matmul(t(np.zeros((2, 2, 3))), t(np.zeros((3, 3, 4)))), kiln.ShapeError,
     r"expected batch dimensions that broadcast, got \[2\] and \[3\]"),
    (lambda: mint.matmul(t(np.zeros(3)), 2.0), kiln.ShapeError, "at least 1 dimension"),
    (lambda: t(np.zeros((2, 3))) @ t(np.zeros((2, 3))), kiln.ShapeError, "got 3 and 2"),
    (lambda: mint.bmm(t(np.zeros((2, 3))), t(np.zeros((3, 4)))), kiln.ShapeError,
     "bmm: expected 3-d tensors"),
    (lambda: mint.bmm(t(np.zeros((2, 2, 3))), t(np.zeros((2, 4, 4)))), kiln.ShapeError,
     r"bmm: a has shape \[2, 2, 3\] and b has shape \[2, 4, 4\]; expected a.shape\[2\] == "
     r"b.shape\[1\], got 3 and 4"),
    (lambda: mint.linear(t(np.zeros((2, 3))), t(np.zeros((4, 5)))), kiln.ShapeError,
     r"linear: x has shape \[2, 3\] and weight has shape \[4, 5\]; expected x.shape\[-1\] == "
     r"weight.shape\[1\], got 3 and 5"),
    (lambda: mint.linear(t(np.zeros(3)), t(np.zeros(3))), kiln.ShapeError,
     r"expected weight of shape \[out_features, in_features\]"),
    (lambda: mint.linear(t(np.zeros(3)), t(np.zeros((2, 3))), t(np.zeros(3))), kiln.ShapeError,
     r"expected bias of shape \[2\], got \[3\]"),
    (lambda: mint.linear(t(np.ones(3, bool)), t(np.ones((2, 3), bool))), kiln.DTypeError,
     "linear: expected numeric tensors, got bool"),
    (lambda: mint.addmm(t(np.zeros(5)), t(np.zeros((2, 3))), t(np.zeros((3, 4)))),
     kiln.ShapeError, r"addmm: bias has shape \[5\]; expected a shape that broadcasts"),
    (lambda: mint.addmm(t(np.zeros(4)), t(np.zeros(3)), t(np.zeros((3, 4)))), kiln.ShapeError,
     "addmm: expected 2-d a and b"),
    (lambda: mint.addmm(t(np.zeros(2, np.int32)), t(np.zeros((2, 2), np.int32)),
                        t(np.zeros((2, 2), np.int32)), alpha=0.5), kiln.KilnValueError,
     "whole-number alpha and beta"),
])
def test_matrix_product_errors(call, error, message):
    with raises(error, match=message):
        call()


# ---------------------------------------------------------------------------------------------
# conv2d

def conv2d_reference(x, w, b, stride, padding, dilation, groups):
    """Cross-correlation as PyTorch defines it, one kernel tap at a time (an im2col in slices)."""
    x, w = f64(x), f64(w)
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for g in range(groups):
        xg = xp[:, g * cg:(g + 1) * cg]
        wg = w[g * og:(g + 1) * og]
        for i in range(kh):
            for j in range(kw):
                patch = xg[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh,
                           j * dw:j * dw + sw * (ow - 1) + 1:sw]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, wg[:, :, i, j])
    if b is not None:
        out += f64(b)[None, :, None, None]
    return out


CONV_CASES = [
    # (x shape, weight shape, stride, padding, dilation, groups)
    ((2, 3, 7, 6), (4, 3, 3, 3), 1, 0, 1, 1),
    ((1, 3, 8, 8), (2, 3, 3, 3), 2, 1, 1, 1),
    ((2, 2, 9, 7), (3, 2, 3, 2), (2, 1), (1, 0), (2, 1), 1),
    ((1, 4, 6, 6), (6, 2, 3, 3), 1, 1, 1, 2),
    ((2, 4, 5, 5), (4, 1, 3, 3), 1, 1, 1, 4),  # depthwise
    ((1, 6, 10, 9), (3, 2, 2, 3), (3, 2), (1, 2), (2, 3), 3),
    ((1, 1, 5, 5), (1, 1, 2, 2), 2, 0, 1, 1),  # stride skips the last row and column
    ((1, 2, 4, 4), (3, 2, 1, 1), 1, 0, 1, 1),
]


def as_pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


@pytest.mark.parametrize("x_shape, w_shape, stride, padding, dilation, groups", CONV_CASES,
                         ids=str)
@pytest.mark.parametrize("with_bias", [True, False])
def test_conv2d_float32(x_shape, w_shape, stride, padding, dilation, groups, with_bias, rng):
    x = random_array(x_shape, kiln.float32, rng, -1, 1)
    w = random_array(w_shape, kiln.float32, rng, -1, 1)
    b = random_array((w_shape[0],), kiln.float32, rng, -1, 1) if with_bias else None
    out = mint.conv2d(t(x), t(w), None if b is None else t(b), stride=stride, padding=padding,
                      dilation=dilation, groups=groups)
    expected = conv2d_reference(x, w, b, as_pair(stride), as_pair(padding), as_pair(dilation),
                                groups)
    check_product(out, expected, kiln.float32)


@pytest.mark.parametrize("dtype", [kiln.float64, kiln.float16, kiln.bfloat16],
                         ids=lambda d: d.name)
@pytest.mark.parametrize("case", [CONV_CASES[2], CONV_CASES[5]], ids=str)
def test_conv2d_other_float_dtypes(dtype, case, rng):
    x_shape, w_shape, stride, padding, dilation, groups = case
    x = random_array(x_shape, dtype, rng, -1, 1)
    w = random_array(w_shape, dtype, rng, -1, 1)
    b = random_array((w_shape[0],), dtype, rng, -1, 1)
    out = mint.conv2d(t(x, dtype), t(w, dtype), t(b, dtype), stride, padding, dilation, groups)
    assert out.dtype == dtype
    expected = conv2d_reference(x, w, b, as_pair(stride), as_pair(padding), as_pair(dilation),
                                groups)
    check_product(out, expected, dtype)


def test_conv2d_non_contiguous_input(rng):
    x = random_array((1, 2, 6, 5), kiln.float32, rng)
    w = random_array((3, 2, 3, 3), kiln.float32, rng)
    kx = t(x).transpose(2, 3)  # [1, 2, 5, 6]
    out = mint.conv2d(kx, t(w), padding=1)
    expected = conv2d_reference(x.transpose(0, 1, 3, 2), w, None, (1, 1), (1, 1), (1, 1), 1)
    check_product(out, expected, kiln.float32)


@pytest.mark.parametrize("call, error, message", [
    (lambda x, w: mint.conv2d(x.select(0, 0), w), kiln.ShapeError,
     r"conv2d: expected x of shape \[N, C, H, W\], got \[3, 5, 5\]"),
    (lambda x, w: mint.conv2d(x, w.select(0, 0)), kiln.ShapeError, "expected weight of shape"),
    (lambda x, w: mint.conv2d(x, w, groups=2), kiln.ShapeError,
     r"conv2d: x has shape \[1, 3, 5, 5\] and weight has shape \[4, 3, 3, 3\]; expected "
     r"weight.shape\[1\] \* groups == x.shape\[1\], got 3 \* 2 and 3"),
    (lambda x, w: mint.conv2d(x, w, t(np.zeros(3, np.float32))), kiln.ShapeError,
     r"expected bias of shape \[4\], got \[3\]"),
    (lambda x, w: mint.conv2d(x, w, stride=0), kiln.KilnValueError,
     r"stride of two integers in \[1, 2\^31 - 1\]"),
    (lambda x, w: mint.conv2d(x, w, padding=-1), kiln.KilnValueError, "padding"),
    (lambda x, w: mint.conv2d(x, w, dilation=(1, 0)), kiln.KilnValueError, "dilation"),
    (lambda x, w: mint.conv2d(x, w, groups=0), kiln.KilnValueError, "groups >= 1"),
    (lambda x, w: mint.conv2d(x, w, dilation=3), kiln.ShapeError,
     r"padded input height \(5\) to be at least the dilated kernel height \(7\)"),
    (lambda x, w: mint.conv2d(x, w, stride=(1, 2, 3)), kiln.KilnValueError, "stride"),
    (lambda x, w: mint.conv2d(x, w, stride="a"), kiln.KilnTypeError, "int or a pair"),
    (lambda x, w: mint.conv2d(x, w, stride=2**70), kiln.KilnTypeError,
     "stride: 1180591620717411303424 does not fit in int64"),
    (lambda x, w: mint.conv2d(x, w, padding=(1, 2**70)), kiln.KilnTypeError,
     r"padding: expected an int or a pair of ints, got \(1, 1180591620717411303424\)"),
    (lambda x, w: mint.conv2d(t(np.zeros((1, 3, 5, 5), np.int32)), t(np.zeros((4, 3, 3, 3),
                              np.int32))), kiln.DTypeError, "conv2d: expected floating-point"),
    # An empty kernel was oneDNN's "internal error" in float32, a taller output in float64.
    (lambda x, w: mint.conv2d(x, w[:, :, :0]), kiln.ShapeError,
     r"conv2d: expected a kernel of at least 1 x 1, got weight of shape \[4, 3, 0, 3\]"),
    (lambda x, w: mint.conv2d(x.double(), w[:, :, :, :0].double()), kiln.ShapeError,
     r"a kernel of at least 1 x 1, got weight of shape \[4, 3, 3, 0\]"),
])
def test_conv2d_errors(call, error, message):
    x = t(np.zeros((1, 3, 5, 5), np.float32))
    w = t(np.zeros((4, 3, 3, 3), np.float32))
    with raises(error, match=message):
        call(x, w)


# ---------------------------------------------------------------------------------------------
# max_pool2d, avg_pool2d

def pool_out_size(n, k, s, p, d, ceil_mode):
    out = (n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def max_pool_reference(x, kernel, stride, padding, dilation, ceil_mode):
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    h, w = x.shape[2:]
    oh = pool_out_size(h, kh, sh, ph, dh, ceil_mode)
    ow = pool_out_size(w, kw, sw, pw, dw, ceil_mode)
    out = np.empty(x.shape[:2] + (oh, ow), x.dtype)
    for i in range(oh):
        rows = [r for r in range(i * sh - ph, i * sh - ph + dh * kh, dh) if 0 <= r < h]
        for j in range(ow):
            cols = [c for c in range(j * sw - pw, j * sw - pw + dw * kw, dw) if 0 <= c < w]
            out[:, :, i, j] = x[:, :, rows][:, :, :, cols].max(axis=(2, 3))
    return out


def avg_pool_reference(x, kernel, stride, padding, ceil_mode, count_include_pad):
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    h, w = x.shape[2:]
    oh = pool_out_size(h, kh, sh, ph, 1, ceil_mode)
    ow = pool_out_size(w, kw, sw, pw, 1, ceil_mode)
    x = f64(x)
    out = np.empty(x.shape[:2] + (oh, ow))
    for i in range(oh):
        h0 = i * sh - ph
        h1 = min(h0 + kh, h + ph)
        for j in range(ow):
            w0 = j * sw - pw
            w1 = min(w0 + kw, w + pw)
            padded = (h1 - h0) * (w1 - w0)
            r0, r1, c0, c1 = max(h0, 0), min(h1, h), max(w0, 0), min(w1, w)
            total = x[:, :, r0:r1, c0:c1].sum(axis=(2, 3))
            out[:, :, i, j] = total / (padded if count_include_pad else (r1 - r0) * (c1 - c0))
    return out


POOL_CASES = [
    # (x shape, kernel, stride, padding, dilation, ceil_mode)
    ((2, 3, 6, 6), 2, None, 0, 1, False),
    ((1, 2, 7, 5), 3, 2, 1, 1, False),
    ((1, 2, 7, 5), 3, 2, 1, 1, True),
    ((1, 1, 8, 9), (3, 2), (2, 3), (1, 1), 1, True),
    ((2, 2, 9, 9), 3, 1, 1, 2, False),
    ((1, 1, 10, 7), 2, 3, 0, (2, 3), True),
    ((1, 1, 5, 5), 4, 3, 2, 1, True),
    ((1, 2, 3, 3), 4, 4, 0, 1, True),  # ceil_mode: x shorter than the kernel, one partial window
    # Rows wide enough for the vector loops and their tails (Note [Max pooling by runs]).
    ((2, 3, 9, 67), 3, 2, 1, 1, False),
    ((1, 2, 5, 70), 3, 1, 1, 1, True),
    ((1, 2, 4, 41), 2, 2, 0, 1, True),
    ((1, 1, 5, 53), (2, 5), (1, 3), (1, 2), (1, 2), False),
    ((1, 2, 7, 50), 2, 3, 0, 1, False),  # a stride past the kernel: columns no window reads
    # Windows that tile x (Note [Max pooling backward by tiles]), with a row and columns past the
    # last window, a width the vector loop ends in a tail of, a kernel width of 3 and one of 2 x 3.
    ((2, 2, 7, 69), 2, None, 0, 1, False),
    ((1, 2, 9, 10), 3, None, 0, 1, False),
    ((1, 3, 6, 8), (2, 3), None, 0, 1, False),
]


@pytest.mark.parametrize("x_shape, kernel, stride, padding, dilation, ceil_mode", POOL_CASES,
                         ids=str)
def test_max_pool2d(x_shape, kernel, stride, padding, dilation, ceil_mode, rng):
    x = random_array(x_shape, kiln.float32, rng)
    out = mint.max_pool2d(t(x), kernel, stride, padding, dilation, ceil_mode)
    expected = max_pool_reference(x, as_pair(kernel), as_pair(stride or kernel),
                                  as_pair(padding), as_pair(dilation), ceil_mode)
    np.testing.assert_array_equal(out.numpy(), expected)


@pytest.mark.parametrize("dtype", [kiln.float64, kiln.float16, kiln.bfloat16, kiln.int32,
                                   kiln.uint8, kiln.int64], ids=lambda d: d.name)
@pytest.mark.parametrize("width", [6, 45])
@pytest.mark.parametrize("kernel, stride, padding", [(2, 2, 1), (3, 1, 1), (3, 3, 0)], ids=str)
def test_max_pool2d_dtypes_and_nan(dtype, width, kernel, stride, padding, rng):
    x = random_array((1, 2, 5, width), dtype, rng)
    if dtype.is_floating_point:
        x[0, 0, 1, 1] = np.nan
        x[0, 1, 3, width - 2] = np.nan
    out = mint.max_pool2d(t(x, dtype), kernel, stride, padding, ceil_mode=True)
    assert out.dtype == dtype
    expected = max_pool_reference(x, (kernel,) * 2, (stride,) * 2, (padding,) * 2, (1, 1), True)
    np.testing.assert_array_equal(out.numpy(), expected)


def max_pool_argmax_reference(x, out_hw, kernel, stride, padding, dilation):
    """Where each window's maximum is, as an offset in its plane ([N * C, OH, OW]): the first
    maximum in (kh, kw) order, or the last nan (PyTorch's choice)."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    n, c, h, w = x.shape
    planes = x.reshape(n * c, h * w).astype(np.float64)
    at = np.full((n * c,) + out_hw, -1)
    for i in range(out_hw[0]):
        for j in range(out_hw[1]):
            best = np.full(n * c, -np.inf)
            for a in range(kh):
                for b in range(kw):
                    r, col = i * sh - ph + a * dh, j * sw - pw + b * dw
                    if 0 <= r < h and 0 <= col < w:
                        v = planes[:, r * w + col]
                        wins = (at[:, i, j] < 0) | (v > best) | np.isnan(v)
                        best = np.where(wins, v, best)
                        at[:, i, j] = np.where(wins, r * w + col, at[:, i, j])
    return at


@pytest.mark.parametrize("x_shape, kernel, stride, padding, dilation, ceil_mode", POOL_CASES,
                         ids=str)
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.float16, kiln.bfloat16])
def test_max_pool2d_gradient_picks_the_first_maximum(x_shape, kernel, stride, padding, dilation,
                                                     ceil_mode, dtype, rng):
    # Small integers: most windows hold ties, which must go to the first maximum, as must the
    # rare nan's window to its last nan.
    x = rng.integers(-3, 3, size=x_shape).astype(np.float64)
    x.reshape(-1)[rng.integers(0, x.size, size=2)] = np.nan
    xt = t(x, dtype).requires_grad_()
    y = mint.max_pool2d(xt, kernel, stride, padding, dilation, ceil_mode)
    g = rng.integers(1, 5, size=y.shape).astype(np.float64)
    gt = t(g, dtype).requires_grad_()
    (dx,) = kiln.autograd.grad(y, xt, gt, create_graph=True)
    assert dx.dtype == dtype
    n, c = x_shape[:2]
    at = max_pool_argmax_reference(x, tuple(y.shape[2:]), as_pair(kernel),
                                   as_pair(stride or kernel), as_pair(padding), as_pair(dilation))
    expected = np.zeros((n * c, x.size // (n * c)))
    np.add.at(expected, (np.arange(n * c)[:, None, None], at), g.reshape(at.shape))
    np.testing.assert_array_equal(dx.to(kiln.float64).numpy(), expected.reshape(x_shape))
    # The gradient of dx in g (MaxPool2DSelect): v picked at each window's maximum.
    v = rng.integers(-4, 4, size=x_shape).astype(np.float64)
    (picked,) = kiln.autograd.grad(dx, gt, t(v, dtype))
    want = np.take_along_axis(v.reshape(n * c, -1), at.reshape(n * c, -1), axis=1)
    np.testing.assert_array_equal(picked.to(kiln.float64).numpy(), want.reshape(y.shape))


@pytest.mark.parametrize("stride", [None, 1], ids=["tiled", "overlapping"])
def test_max_pool2d_gradient_of_minus_zero_is_plus_zero(stride):
    # As PyTorch's (a zeroed dx plus the gradient): both window layouts agree.
    x = kiln.tensor(np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)).requires_grad_()
    y = mint.max_pool2d(x, 2, stride)
    (dx,) = kiln.autograd.grad(y, x, kiln.tensor(np.full(tuple(y.shape), -0.0, np.float32)))
    assert not np.signbit(dx.numpy()).any()


@pytest.mark.parametrize("x_shape, kernel, stride, padding, dilation, ceil_mode",
                         [c for c in POOL_CASES if c[4] == 1], ids=str)
@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool2d(x_shape, kernel, stride, padding, dilation, ceil_mode, count_include_pad,
                    rng):
    x = random_array(x_shape, kiln.float32, rng)
    out = mint.avg_pool2d(t(x), kernel, stride, padding, ceil_mode, count_include_pad)
    expected = avg_pool_reference(x, as_pair(kernel), as_pair(stride or kernel),
                                  as_pair(padding), ceil_mode, count_include_pad)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-6)


def avg_pool_grad_reference(x_shape, g, kernel, stride, padding, count_include_pad):
    """x's gradient: each window's g divided by its divisor, added over the window."""
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    h, w = x_shape[2:]
    dx = np.zeros(x_shape)
    for i in range(g.shape[2]):
        h0 = i * sh - ph
        h1 = min(h0 + kh, h + ph)
        for j in range(g.shape[3]):
            w0 = j * sw - pw
            w1 = min(w0 + kw, w + pw)
            r0, r1, c0, c1 = max(h0, 0), min(h1, h), max(w0, 0), min(w1, w)
            count = (h1 - h0) * (w1 - w0) if count_include_pad else (r1 - r0) * (c1 - c0)
            dx[:, :, r0:r1, c0:c1] += g[:, :, i, j][:, :, None, None] / count
    return dx


@pytest.mark.parametrize("x_shape, kernel, stride, padding, dilation, ceil_mode",
                         [c for c in POOL_CASES if c[4] == 1], ids=str)
@pytest.mark.parametrize("count_include_pad", [True, False])
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64])
def test_avg_pool2d_gradient_matches_numpy(x_shape, kernel, stride, padding, dilation, ceil_mode,
                                           count_include_pad, dtype, rng):
    xt = t(random_array(x_shape, kiln.float64, rng), dtype).requires_grad_()
    y = mint.avg_pool2d(xt, kernel, stride, padding, ceil_mode, count_include_pad)
    g = rng.standard_normal(y.shape)
    (dx,) = kiln.autograd.grad(y, xt, t(g, dtype))
    expected = avg_pool_grad_reference(x_shape, g, as_pair(kernel), as_pair(stride or kernel),
                                       as_pair(padding), count_include_pad)
    np.testing.assert_allclose(dx.to(kiln.float64).numpy(), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [kiln.float64, kiln.float16, kiln.bfloat16],
                         ids=lambda d: d.name)
@pytest.mark.parametrize("width", [7, 52])
def test_avg_pool2d_dtypes_and_strided_input(dtype, width, rng):
    x = random_array((1, 2, 6, width), dtype, rng)
    kx = t(x.transpose(0, 1, 3, 2).copy(), dtype).transpose(2, 3)  # non-contiguous view of x
    out = mint.avg_pool2d(kx, (2, 3), padding=1, count_include_pad=False)
    assert out.dtype == dtype
    expected = avg_pool_reference(x, (2, 3), (2, 3), (1, 1), False, False)
    rtol, atol = TOLERANCES[dtype]
    np.testing.assert_allclose(out.numpy().astype(np.float64), expected, rtol=rtol, atol=atol)


@pytest.mark.parametrize("call, error, message", [
    (lambda x: mint.max_pool2d(x, 3, padding=2), kiln.KilnValueError,
     "max_pool2d: expected padding at most half the kernel size"),
    (lambda x: mint.avg_pool2d(x, 2, padding=(0, 2)), kiln.KilnValueError, "at most half"),
    (lambda x: mint.max_pool2d(x, 0), kiln.KilnValueError,
     r"kernel_size of two integers in \[1, 2\^31 - 1\]"),
    (lambda x: mint.max_pool2d(x, 2, stride=0), kiln.KilnValueError, "stride"),
    (lambda x: mint.max_pool2d(x, 2, dilation=0), kiln.KilnValueError, "dilation"),
    (lambda x: mint.max_pool2d(x, 6), kiln.ShapeError,
     r"the padded input height \(5\) holds no window of the dilated kernel height \(6\); "
     r"expected at least 6"),
    (lambda x: mint.max_pool2d(x[:, :, :1], 4, 1, ceil_mode=True), kiln.ShapeError,
     r"input height \(1\) holds no window of the dilated kernel height \(4\); expected at "
     r"least 4 with ceil_mode"),
    (lambda x: mint.max_pool2d(x[:, :, :0], 2, 3, ceil_mode=True), kiln.ShapeError,
     r"input height \(0\) holds no window of the dilated kernel height \(2\); expected at "
     r"least 1 with ceil_mode"),
    (lambda x: mint.max_pool2d(x.select(0, 0), 2), kiln.ShapeError,
     r"max_pool2d: expected x of shape \[N, C, H, W\], got \[1, 5, 5\]"),
    (lambda x: mint.avg_pool2d(t(np.zeros((1, 1, 4, 4), np.int32)), 2), kiln.DTypeError,
     "avg_pool2d: expected a floating-point x, got int32"),
    (lambda x: mint.max_pool2d(t(np.zeros((1, 1, 4, 4), bool)), 2), kiln.DTypeError,
     "max_pool2d: expected a numeric x, got bool"),
    (lambda x: mint.max_pool2d(x, True), kiln.KilnTypeError, "got a bool"),
])
def test_pool_errors(call, error, message):
    x = t(np.zeros((1, 1, 5, 5), np.float32))
    with raises(error, match=message):
        call(x)


# ---------------------------------------------------------------------------------------------
# layer_norm, rms_norm

def layer_norm_reference(x, n_dims, w, b, eps):
    x = f64(x)
    axes = tuple(range(x.ndim - n_dims, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps)
    return y * (f64(w) if w is not None else 1) + (f64(b) if b is not None else 0)


def rms_norm_reference(x, n_dims, w, eps):
    x = f64(x)
    axes = tuple(range(x.ndim - n_dims, x.ndim))
    y = x / np.sqrt((x ** 2).mean(axis=axes, keepdims=True) + eps)
    return y * (f64(w) if w is not None else 1)


NORM_DTYPE_TOL = {kiln.float32: (1e-5, 1e-5), kiln.float64: (1e-12, 1e-12),
                  kiln.float16: (2e-3, 2e-3), kiln.bfloat16: (1.6e-2, 1.6e-2)}


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("shape, normalized", [((4, 7), 7), ((2, 3, 5), [3, 5]), ((9,), [9]),
                                               ((2, 0, 4), [4])], ids=str)
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(dtype, shape, normalized, affine, rng):
    normalized_shape = [normalized] if isinstance(normalized, int) else normalized
    x = random_array(shape, dtype, rng)
    w = random_array(normalized_shape, dtype, rng) if affine else None
    b = random_array(normalized_shape, dtype, rng) if affine else None
    out = mint.layer_norm(t(x, dtype), normalized, None if w is None else t(w, dtype),
                          None if b is None else t(b, dtype), eps=1e-5)
    assert out.dtype == dtype and out.shape == shape
    rtol, atol = NORM_DTYPE_TOL[dtype]
    expected = layer_norm_reference(x, len(normalized_shape), w, b, 1e-5)
    np.testing.assert_allclose(out.numpy().astype(np.float64), expected, rtol=rtol,
                               atol=atol * 10)


def test_row_ops_match_numpy_when_output_is_large(rng):
    # 4096 x 4103 float32 is 67 MB, more than half of most last-level caches, so these ops stream
    # their output past the cache (Note [streaming stores]); 4103 puts the rows on every alignment.
    x = rng.standard_normal((4096, 4103), dtype=np.float32) * 3
    w = rng.standard_normal(4103, dtype=np.float32)
    b = rng.standard_normal(4103, dtype=np.float32)
    xt, wt, bt = kiln.tensor(x), kiln.tensor(w), kiln.tensor(b)
    rows = slice(None, None, 61)  # a sample of rows keeps the float64 references quick
    xs = f64(x[rows])
    shifted = xs - xs.max(axis=-1, keepdims=True)
    softmax = np.exp(shifted) / np.exp(shifted).sum(axis=-1, keepdims=True)
    cases = [
        (mint.softmax(xt, -1), softmax),
        (mint.log_softmax(xt, -1), np.log(softmax)),
        (mint.layer_norm(xt, [4103], wt, bt, 1e-5), layer_norm_reference(x[rows], 1, w, b, 1e-5)),
        (mint.rms_norm(xt, [4103], wt, 1e-6), rms_norm_reference(x[rows], 1, w, 1e-6)),
    ]
    for out, expected in cases:
        np.testing.assert_allclose(out.numpy()[rows].astype(np.float64), expected, rtol=1e-5,
                                   atol=1e-5)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("affine", [True, False])
def test_rms_norm(dtype, affine, rng):
    x = random_array((3, 4, 6), dtype, rng)
    w = random_array((4, 6), dtype, rng) if affine else None
    out = mint.rms_norm(t(x, dtype), (4, 6), None if w is None else t(w, dtype), eps=1e-6)
    assert out.dtype == dtype
    rtol, atol = NORM_DTYPE_TOL[dtype]
    np.testing.assert_allclose(out.numpy().astype(np.float64), rms_norm_reference(x, 2, w, 1e-6),
                               rtol=rtol, atol=atol * 10)


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.bfloat16], ids=lambda d: d.name)
def test_norms_of_rows_whose_squares_overflow(dtype):
    # Deviations of 1e30: their float32 squares are inf, and the row came out all 0 (PyTorch:
    # NaN). The statistics are taken again, scaled, in double. So is a mean whose float32 sum
    # overflows (the rows of 2e38 and 3e38 came out NaN).
    x = np.array([[1e30, -1e30, 0, 0], [1e38, 0, 0, 0], [1, 2, 3, 4], [2e38, 2e38, 2e38, 3e38],
                  [2e38, -3e38, 2e38, -3e38]], np.float32)
    kx = t(x).to(dtype)
    x64 = kx.float().numpy().astype(np.float64)
    rtol = 1e-5 if dtype == kiln.float32 else 1e-2
    np.testing.assert_allclose(mint.layer_norm(kx, 4).float().numpy(),
                               layer_norm_reference(x64, 1, None, None, 1e-5), rtol=rtol,
                               atol=rtol)
    np.testing.assert_allclose(mint.rms_norm(kx, [4]).float().numpy(),
                               rms_norm_reference(x64, 1, None, 1e-6), rtol=rtol, atol=rtol)


def test_norms_on_non_contiguous_input_and_mixed_dtypes(rng):
    x = random_array((6, 5), kiln.float32, rng)
    kx = t(x).T  # [5, 6]
    np.testing.assert_allclose(mint.layer_norm(kx, 6).numpy(),
                               layer_norm_reference(x.T, 1, None, None, 1e-5), rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_allclose(mint.rms_norm(kx, [6]).numpy(),
                               rms_norm_reference(x.T, 1, None, 1e-6), rtol=1e-5, atol=1e-5)
    # x's dtype, as PyTorch's: mixed precision (float16 x, float32 weight) normalizes to float16.
    w = random_array((6,), kiln.float64, rng)
    out = mint.layer_norm(kx, 6, t(w))
    assert out.dtype == kiln.float32
    np.testing.assert_allclose(out.numpy(), layer_norm_reference(x.T, 1, w, None, 1e-5),
                               rtol=1e-5, atol=1e-5)
    half = kx.to(kiln.float16)
    w32 = t(w.astype(np.float32))
    for out, ref in ((mint.layer_norm(half, 6, w32, w32),
                      layer_norm_reference(half.numpy().astype(np.float64), 1, w, w, 1e-5)),
                     (mint.rms_norm(half, [6], w32),
                      rms_norm_reference(half.numpy().astype(np.float64), 1, w, 1e-6))):
        assert out.dtype == kiln.float16
        np.testing.assert_allclose(out.numpy().astype(np.float64), ref, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("call, error, message", [
    (lambda x: mint.layer_norm(x, [4, 3]), kiln.ShapeError,
     r"layer_norm: x has shape \[2, 3, 4\] and normalized_shape is \[4, 3\]; expected the "
     r"trailing dimensions of x to be \[4, 3\]"),
    (lambda x: mint.layer_norm(x, [1, 2, 3, 4]), kiln.ShapeError, "trailing dimensions"),
    (lambda x: mint.layer_norm(x, []), kiln.ShapeError, "non-empty normalized_shape"),
    (lambda x: mint.layer_norm(x, 4, t(np.ones(3, np.float32))), kiln.ShapeError,
     r"expected weight of shape \[4\] \(normalized_shape\), got \[3\]"),
    (lambda x: mint.layer_norm(x, 4, None, t(np.ones((1, 4), np.float32))), kiln.ShapeError,
     r"expected bias of shape \[4\]"),
    (lambda x: mint.layer_norm(t(np.ones((2, 4), np.int32)), 4), kiln.DTypeError,
     "layer_norm: expected a floating-point x, got int32"),
    (lambda x: mint.layer_norm(x, 4, t(np.ones(4, np.int64))), kiln.DTypeError,
     "floating-point weight, got int64"),
    (lambda x: mint.rms_norm(x, [3]), kiln.ShapeError, "rms_norm: x has shape"),
    (lambda x: mint.rms_norm(x, 4, t(np.ones(5, np.float32))), kiln.ShapeError,
     "rms_norm: expected weight of shape"),
    (lambda x: mint.layer_norm(x, "a"), kiln.KilnTypeError, "normalized_shape"),
])
def test_norm_errors(call, error, message):
    x = t(np.zeros((2, 3, 4), np.float32))
    with raises(error, match=message):
        call(x)


# ---------------------------------------------------------------------------------------------
# embedding

@pytest.mark.parametrize("index_dtype", [kiln.int64, kiln.int32, kiln.uint8, kiln.int16],
                         ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(), (5,), (2, 3), (0,)], ids=str)
def test_embedding(index_dtype, shape, rng):
    weight = random_array((7, 4), kiln.float32, rng)
    idx = rng.integers(0, 7, size=shape).astype(numpy_dtype(index_dtype))
    out = mint.embedding(t(idx, index_dtype), t(weight))
    assert out.shape == shape + (4,)
    np.testing.assert_array_equal(out.numpy(), weight[idx])


@pytest.mark.parametrize("dtype", [kiln.float64, kiln.bfloat16, kiln.int8, kiln.bool_],
                         ids=lambda d: d.name)
def test_embedding_weight_dtypes_and_layouts(dtype, rng):
    weight = random_array((5, 3), dtype, rng)
    idx = np.array([[4, 0], [2, 2]])
    out = mint.embedding(t(idx), t(weight, dtype))
    assert out.dtype == dtype
    np.testing.assert_array_equal(out.numpy(), weight[idx])
    wt = t(weight.T.copy(), dtype).T  # a transposed (column-major) table
    np.testing.assert_array_equal(mint.embedding(t(idx), wt).numpy(), weight[idx])


@pytest.mark.parametrize("call, error, message", [
    (lambda w: mint.embedding(t(np.array([0, 5])), w), kiln.KilnIndexError,
     r"embedding: index 5 is out of range for a weight with 5 rows \(expected 0 <= index < 5\)"),
    (lambda w: mint.embedding(t(np.array([-1])), w), kiln.KilnIndexError, "index -1"),
    (lambda w: mint.embedding(t(np.array([0.0, 1.0], np.float32)), w), kiln.DTypeError,
     "embedding: expected integer indices, got float32"),
    (lambda w: mint.embedding(t(np.array([True])), w), kiln.DTypeError, "got bool"),
    (lambda w: mint.embedding(t(np.array([0])), w.select(1, 0)), kiln.ShapeError,
     r"expected weight of shape \[num_embeddings, embedding_dim\], got \[5\]"),
])
def test_embedding_errors(call, error, message):
    w = t(np.zeros((5, 3), np.float32))
    with raises(error, match=message):
        call(w)


@pytest.mark.parametrize("pool", ["max_pool2d", "avg_pool2d"])
def test_a_pool_stride_past_the_input_costs_nothing_more(pool, rng):
    # One output column: the stride reads nothing. A stride of 10**7 staged a row that long per
    # plane (12 s), one of 2**31 took 8 GB.
    x = kiln.tensor(rng.standard_normal((2, 3, 6, 7)).astype(np.float32), requires_grad=True)
    fn = getattr(mint, pool)
    want = fn(x, 2, 7)
    for stride in (10 ** 7, 2 ** 31 - 1):
        got = fn(x, 2, stride)
        assert got.shape == (2, 3, 1, 1)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    fn(x, 2, (1, 2 ** 31 - 1)).sum().backward()
    grad = x.grad.numpy()
    x.grad = None
    fn(x, 2, (1, 7)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), grad, rtol=1e-6)
    with raises(kiln.KilnValueError, match=r"stride of two integers in \[1, 2\^31 - 1\]"):
        fn(x, 2, 2 ** 31)


@pytest.mark.parametrize("argument", ["stride", "padding", "dilation"])
def test_conv2d_arguments_past_int32_are_refused(argument):
    x, w = mint.ones([1, 2, 5, 5]), mint.ones([3, 2, 3, 3])
    with raises(kiln.KilnValueError, match=fr"conv2d: expected {argument} of two integers in "
                                           fr"\[[01], 2\^31 - 1\]"):
        mint.conv2d(x, w, None, **{argument: 2 ** 31})
    assert mint.conv2d(x, w, None, stride=2 ** 31 - 1).shape == (1, 3, 1, 1)
