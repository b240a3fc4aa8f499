"""The volumetric (3-d) layers: conv3d, conv_transpose3d, max_pool3d, avg_pool3d,
adaptive_avg_pool3d and adaptive_max_pool3d (kiln/nn/_volume_functions.py: the convolutions on
kiln.mint's Conv3D ops, which are also tested here through kiln.mint, the pools composed of the
2-d ones) and their cells Conv3d, ConvTranspose3d, MaxPool3d, AvgPool3d, AdaptiveAvgPool3d,
AdaptiveMaxPool3d and BatchNorm3d. Against NumPy references that visit each kernel tap or window,
against PyTorch (values, indices, gradients, parameters, state dicts) where it is installed,
batched and unbatched, under kiln.jit, and their argument errors."""

import math

import numpy as np
import pytest

import kiln
from conftest import TOLERANCES, check_cell_against_torch, check_torch, raises, t
from kiln.errors import DTypeError, KilnTypeError, KilnValueError, ShapeError
from kiln.nn import (AdaptiveAvgPool3d, AdaptiveMaxPool3d, AvgPool3d, BatchNorm3d, Conv3d,
                     ConvTranspose3d, MaxPool3d)
from kiln.nn import functional as V

mint = kiln.mint


def triple(value):
    return (value,) * 3 if isinstance(value, int) else tuple(value)


def pooled_size(size, kernel, stride, padding, dilation, ceil_mode):
    """PyTorch's pooling_output_shape."""
    span = dilation * (kernel - 1) + 1
    out = (size + 2 * padding - span + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1
    return out


def adaptive_windows(size, out):
    return [(i * size // out, -(-(i + 1) * size // out)) for i in range(out)]


# ------------------------------------------------------------------------------------------------
# NumPy references


def conv3d_reference(x, w, b, stride, pads, dilation, groups):
    """Each kernel tap's strided input slice times its weights, summed; ``pads`` (before,
    after) per spatial dimension."""
    s, d = triple(stride), triple(dilation)
    x = np.pad(x, [(0, 0), (0, 0)] + list(pads))
    n, _, *size = x.shape
    c_out, c_group, *k = w.shape
    out_sizes = [(size[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(3)]
    out = np.zeros((n, c_out, *out_sizes))
    o_group = c_out // groups
    for g in range(groups):
        xs, ws = x[:, g * c_group:(g + 1) * c_group], w[g * o_group:(g + 1) * o_group]
        for tap in np.ndindex(*k):
            window = tuple(slice(tap[i] * d[i], tap[i] * d[i] + (out_sizes[i] - 1) * s[i] + 1,
                                 s[i]) for i in range(3))
            out[:, g * o_group:(g + 1) * o_group] += np.einsum(
                "ncdhw,oc->nodhw", xs[(slice(None), slice(None)) + window], ws[(...,) + tap])
    return out if b is None else out + b[None, :, None, None, None]


def conv_transpose3d_reference(x, w, b, stride, padding, output_padding, groups, dilation):
    """Each input element scattered through each kernel tap into the uncropped output, then
    cropped by padding."""
    s, p, op, d = triple(stride), triple(padding), triple(output_padding), triple(dilation)
    n, c_in, *size = x.shape
    _, o_group, *k = w.shape
    full_sizes = [(size[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1 + op[i] for i in range(3)]
    full = np.zeros((n, o_group * groups, *full_sizes))
    c_group = c_in // groups
    for g in range(groups):
        xs, ws = x[:, g * c_group:(g + 1) * c_group], w[g * c_group:(g + 1) * c_group]
        for tap in np.ndindex(*k):
            window = tuple(slice(tap[i] * d[i], tap[i] * d[i] + (size[i] - 1) * s[i] + 1, s[i])
                           for i in range(3))
            full[(slice(None), slice(g * o_group, (g + 1) * o_group)) + window] += np.einsum(
                "ncdhw,co->nodhw", xs, ws[(...,) + tap])
    out = full[(slice(None), slice(None)) + tuple(
        slice(p[i], full_sizes[i] - p[i]) for i in range(3))]
    return out if b is None else out + b[None, :, None, None, None]


def max_pool3d_reference(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """Each window scanned in (d, h, w) order, PyTorch's rule: the first maximum, the last NaN;
    a window without input elements is the lowest value with index -1 (kiln's)."""
    k, p, d = triple(kernel_size), triple(padding), triple(dilation)
    s = k if stride is None else triple(stride)
    n, c, *size = x.shape
    outs = [pooled_size(size[i], k[i], s[i], p[i], d[i], ceil_mode) for i in range(3)]
    lowest = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    values = np.full((n, c, *outs), lowest, x.dtype)
    indices = np.full((n, c, *outs), -1, np.int64)
    for b, ch, *o in np.ndindex(n, c, *outs):
        best = None
        for tap in np.ndindex(*k):
            at = [o[i] * s[i] - p[i] + tap[i] * d[i] for i in range(3)]
            if not all(0 <= at[i] < size[i] for i in range(3)):
                continue
            v = x[(b, ch, *at)]
            if best is None or v > best or np.isnan(v):
                best = v
                values[(b, ch, *o)] = v
                indices[(b, ch, *o)] = (at[0] * size[1] + at[1]) * size[2] + at[2]
    return values, indices


def avg_pool3d_reference(x, kernel_size, stride=None, padding=0, ceil_mode=False,
                         count_include_pad=True, divisor_override=None):
    """PyTorch's avg_pool3d: each window's sum over the input divided by its size clipped to
    the padded input (count_include_pad), its number of input elements, or the override."""
    k, p = triple(kernel_size), triple(padding)
    s = k if stride is None else triple(stride)
    n, c, *size = x.shape
    outs = [pooled_size(size[i], k[i], s[i], p[i], 1, ceil_mode) for i in range(3)]
    out = np.zeros((n, c, *outs))
    for o in np.ndindex(*outs):
        starts = [o[i] * s[i] - p[i] for i in range(3)]
        ends = [min(starts[i] + k[i], size[i] + p[i]) for i in range(3)]
        padded = math.prod(ends[i] - starts[i] for i in range(3))
        lo = [max(v, 0) for v in starts]
        hi = [min(ends[i], size[i]) for i in range(3)]
        box = x[:, :, lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]]
        divisor = (divisor_override or
                   (padded if count_include_pad else math.prod(hi[i] - lo[i] for i in range(3))))
        out[(slice(None), slice(None)) + o] = box.sum(axis=(2, 3, 4)) / divisor
    return out


def adaptive_reference(x, outs, maximum):
    """The mean or the scanned maximum (with its index) of each of PyTorch's adaptive boxes."""
    n, c, *size = x.shape
    windows = [adaptive_windows(size[i], outs[i]) for i in range(3)]
    values = np.zeros((n, c, *outs))
    indices = np.zeros((n, c, *outs), np.int64)
    for o in np.ndindex(*outs):
        (d0, d1), (h0, h1), (w0, w1) = (windows[i][o[i]] for i in range(3))
        box = x[:, :, d0:d1, h0:h1, w0:w1]
        at = (slice(None), slice(None)) + o
        if not maximum:
            values[at] = box.mean(axis=(2, 3, 4))
            continue
        flat = box.reshape(n, c, -1)
        # The first maximum, or the last NaN, of the box in (d, h, w) order.
        nan = np.isnan(flat)
        last_nan = flat.shape[2] - 1 - np.argmax(nan[:, :, ::-1], axis=2)
        pick = np.where(nan.any(axis=2), last_nan, np.argmax(np.where(nan, -np.inf, flat), 2))
        values[at] = np.take_along_axis(flat, pick[:, :, None], 2)[:, :, 0]
        dd, hh, ww = np.unravel_index(pick, box.shape[2:])
        indices[at] = ((d0 + dd) * size[1] + h0 + hh) * size[2] + w0 + ww
    return values, indices


def same_pads(kernel, dilation):
    return [(d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2)
            for k, d in zip(kernel, triple(dilation))]


# ------------------------------------------------------------------------------------------------
# Against the references

# (input shape, weight shape, stride, padding, dilation, groups)
CONVS = [
    ((2, 3, 5, 6, 4), (4, 3, 3, 3, 2), 1, 0, 1, 1),
    ((2, 4, 7, 5, 6), (6, 2, 3, 2, 3), (2, 1, 2), (1, 0, 2), (1, 2, 1), 2),
    ((1, 2, 6, 6, 6), (4, 2, 2, 3, 3), 2, 1, 2, 1),
    ((2, 4, 5, 4, 5), (4, 1, 2, 2, 2), 1, "same", (3, 1, 2), 4),  # odd totals: one zero after
    ((1, 3, 4, 5, 5), (2, 3, 1, 3, 3), (3, 1, 1), "valid", 1, 1),
]


@pytest.mark.parametrize("case", CONVS, ids=str)
@pytest.mark.parametrize("dtype, tol", [(kiln.float32, 1e-4), (kiln.float64, 1e-10)])
def test_conv3d_matches_the_reference(case, dtype, tol, rng):
    shape, w_shape, stride, padding, dilation, groups = case
    x, w, b = (rng.standard_normal(s) for s in (shape, w_shape, w_shape[:1]))
    if padding == "same":
        pads = same_pads(w_shape[2:], dilation)
    else:
        pads = [(p, p) for p in triple(0 if padding == "valid" else padding)]
    got = V.conv3d(t(x, dtype), t(w, dtype), t(b, dtype), stride, padding, dilation, groups)
    want = conv3d_reference(x, w, b, stride, pads, dilation, groups)
    assert got.dtype == dtype and tuple(got.shape) == want.shape
    np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol)
    if padding == "same":
        assert tuple(got.shape[2:]) == shape[2:]


# (input shape, weight shape, stride, padding, output_padding, groups, dilation)
TRANSPOSED = [
    ((2, 3, 3, 4, 2), (3, 2, 3, 2, 3), 1, 0, 0, 1, 1),
    ((2, 4, 3, 3, 4), (4, 3, 2, 3, 2), (2, 3, 1), (1, 1, 0), (1, 2, 0), 2, 1),
    ((1, 2, 2, 3, 3), (2, 2, 3, 3, 2), 3, (2, 1, 1), (1, 0, 2), 1, (1, 2, 3)),
    # output_padding past the stride but below the dilation; padding past the first taps.
    ((1, 2, 1, 2, 2), (2, 1, 3, 2, 2), 1, (5, 0, 1), (2, 0, 1), 1, (5, 1, 2)),
]


@pytest.mark.parametrize("case", TRANSPOSED, ids=str)
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("dtype, tol", [(kiln.float32, 1e-4), (kiln.float64, 1e-10)])
def test_conv_transpose3d_matches_the_reference(case, with_bias, dtype, tol, rng):
    shape, w_shape, stride, padding, output_padding, groups, dilation = case
    x, w = rng.standard_normal(shape), rng.standard_normal(w_shape)
    b = rng.standard_normal(w_shape[1] * groups) if with_bias else None
    got = V.conv_transpose3d(t(x, dtype), t(w, dtype), None if b is None else t(b, dtype), stride,
                             padding, output_padding, groups, dilation)
    want = conv_transpose3d_reference(x, w, b, stride, padding, output_padding, groups,
                                      dilation)
    assert got.dtype == dtype and tuple(got.shape) == want.shape
    np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [kiln.float16, kiln.bfloat16])
def test_conv3d_of_16_bit_floats_is_computed_in_float32_and_rounded_once(dtype, rng):
    x, w, b = (t(rng.standard_normal(s), dtype) for s in ((2, 3, 4, 5, 4), (4, 3, 2, 3, 2), (4,)))
    got = mint.conv3d(x, w, b, (1, 2, 1), 1)
    wide = [v.to(kiln.float64).numpy() for v in (x, w, b)]
    want = conv3d_reference(*wide, (1, 2, 1), [(1, 1)] * 3, 1, 1)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.numpy(), t(want, kiln.float32).to(dtype).numpy())


# ------------------------------------------------------------------------------------------------
# kiln.mint.conv3d / conv_transpose3d: the ops' own argument forms


def test_mint_conv3d_takes_ints_triples_and_padding_strings(rng):
    x, w, b = (rng.standard_normal(s) for s in ((2, 2, 5, 4, 6), (3, 2, 2, 3, 2), (3,)))
    for args, pads in [((2, 1, (1, 2, 1)), [(1, 1)] * 3),
                       (((1, 2, 1), (0, 1, 2), 1), [(0, 0), (1, 1), (2, 2)]),
                       ((1, "valid", (2, 1, 2)), [(0, 0)] * 3),
                       ((1, "same", (1, 1, 3)), same_pads((2, 3, 2), (1, 1, 3)))]:
        stride, padding, dilation = args
        got = mint.conv3d(t(x), t(w), t(b), stride, padding, dilation)
        want = conv3d_reference(x, w, b, stride, pads, dilation, 1)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-10)
    got = mint.conv_transpose3d(t(x), t(w.transpose(1, 0, 2, 3, 4)), t(b), 2, 1, (1, 0, 1))
    want = conv_transpose3d_reference(x, w.transpose(1, 0, 2, 3, 4), b, 2, 1, (1, 0, 1), 1, 1)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-10)


MINT_ERRORS = [
    (lambda x, w: mint.conv3d(x, w, None, (1, 2)), KilnValueError,
     r"conv3d: expected stride of three integers in \[1, 2\^31 - 1\], got \[1, 2\]"),
    (lambda x, w: mint.conv3d(x, w, None, True), KilnTypeError,
     "conv3d: stride: expected an int or a sequence of three ints, got a bool"),
    (lambda x, w: mint.conv3d(x, w, None, 1, "full"), KilnValueError,
     "conv3d: expected padding 'same', 'valid', an int or a sequence of three ints, got 'full'"),
    (lambda x, w: mint.conv3d(x, w, None, 2, "same"), KilnValueError,
     "conv3d: padding='same' needs stride 1"),
    (lambda x, w: mint.conv3d(x, w[0], None, 1, "same"), ShapeError,
     r"conv3d: expected weight of shape \[out_channels, in_channels / groups, kD, kH, kW\]"),
    (lambda x, w: mint.conv3d(x[0], w), ShapeError,
     r"conv3d: expected x of shape \[N, C, D, H, W\], got \[2, 4, 4, 4\]"),
    (lambda x, w: mint.conv3d(x, w, None, 1, (0, 0, 0), (1, 0, 1)), KilnValueError,
     "conv3d: expected dilation of three integers"),
    (lambda x, w: mint.conv_transpose3d(x, w, None, 1, 0, (0, 1, 0)), KilnValueError,
     "conv_transpose3d: expected output_padding below stride or dilation"),
    (lambda x, w: mint.conv_transpose3d(x, w, None, (1, 1)), KilnValueError,
     "conv_transpose3d: expected stride as 3 values, got 2"),
]


@pytest.mark.parametrize("call, error, message", MINT_ERRORS)
def test_mint_conv3d_argument_errors(call, error, message):
    x, w = mint.ones((1, 2, 4, 4, 4)), mint.ones((2, 2, 3, 3, 3))
    with raises(error, match=message):
        call(x, w)


MAX_POOLS = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(2, 3, 2), stride=(2, 1, 2), padding=(1, 1, 0), dilation=(2, 1, 2),
         ceil_mode=True),
    dict(kernel_size=3, stride=2, ceil_mode=True),
    dict(kernel_size=(3, 2, 1), stride=1, padding=(1, 1, 0), dilation=(2, 2, 1)),
]


@pytest.mark.parametrize("kwargs", MAX_POOLS, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "uint8"])
def test_max_pool3d_matches_a_scan_of_each_window(kwargs, dtype, rng):
    # Few distinct values, so that ties are common, and NaNs in the floating inputs.
    x = rng.integers(0, 5, size=(2, 2, 6, 5, 7)).astype(dtype)
    if dtype.startswith("float"):
        x[rng.random(x.shape) < 0.05] = np.nan
    values, indices = V.max_pool3d(t(x), **kwargs, return_indices=True)
    want_values, want_indices = max_pool3d_reference(x, **kwargs)
    assert values.dtype == t(x).dtype and indices.dtype == kiln.int64
    np.testing.assert_array_equal(indices.numpy(), want_indices)
    np.testing.assert_array_equal(values.numpy(), want_values)
    np.testing.assert_array_equal(V.max_pool3d(t(x), **kwargs).numpy(), want_values)


@pytest.mark.parametrize("dtype", ["float32", "int16"])
def test_a_max_pool3d_window_without_input_is_the_lowest_value_with_index_minus_one(dtype):
    # Depths -1 and 2 of an input of depth 2 (kiln.mint.max_pool2d's rule for such windows).
    x = np.arange(2 * 3 * 2, dtype=dtype).reshape(1, 1, 2, 3, 2)
    kwargs = dict(kernel_size=(2, 1, 1), stride=1, padding=(1, 0, 0), dilation=(3, 1, 1))
    values, indices = V.max_pool3d(t(x), **kwargs, return_indices=True)
    want_values, want_indices = max_pool3d_reference(x, **kwargs)
    np.testing.assert_array_equal(values.numpy(), want_values)
    np.testing.assert_array_equal(indices.numpy(), want_indices)
    assert (indices.numpy() == -1).all()


AVG_POOLS = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(2, 3, 2), stride=(2, 1, 2), padding=(1, 1, 0), ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=(3, 2, 3), stride=(1, 2, 2), padding=1, divisor_override=5),
    dict(kernel_size=2, padding=1, ceil_mode=True, divisor_override=-3),
]


@pytest.mark.parametrize("kwargs", AVG_POOLS, ids=str)
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.float16, kiln.bfloat16])
def test_avg_pool3d_matches_the_reference(kwargs, dtype, rng):
    x = t(rng.uniform(-3, 3, size=(2, 2, 7, 6, 5)), dtype)
    got = V.avg_pool3d(x, **kwargs)
    assert got.dtype == dtype
    rtol, atol = TOLERANCES[dtype]
    want = avg_pool3d_reference(x.to(kiln.float64).numpy(), **kwargs)
    np.testing.assert_allclose(got.to(kiln.float64).numpy(), want, rtol=rtol, atol=atol)


# (input shape, output_size)
ADAPTIVE = [((2, 2, 7, 6, 5), (3, 4, 2)), ((1, 3, 6, 6, 4), 2), ((2, 1, 5, 6, 7), (None, 3, 5)),
            ((1, 2, 3, 2, 3), (4, 5, 3)), ((2, 2, 4, 4, 4), (4, 4, 4))]


@pytest.mark.parametrize("shape, output_size", ADAPTIVE, ids=str)
def test_adaptive_pools_match_the_reference(shape, output_size, rng):
    x = rng.integers(0, 4, size=shape).astype(np.float64)  # ties everywhere
    x[rng.random(shape) < 0.04] = np.nan
    outs = [size if out is None else out for out, size in zip(triple(output_size), shape[2:])]
    values, indices = V.adaptive_max_pool3d(t(x), output_size, True)
    want_values, want_indices = adaptive_reference(x, outs, maximum=True)
    np.testing.assert_array_equal(indices.numpy(), want_indices)
    np.testing.assert_array_equal(values.numpy(), want_values)
    np.testing.assert_array_equal(V.adaptive_max_pool3d(t(x), output_size).numpy(), want_values)
    x = rng.standard_normal(shape)
    for dtype in (kiln.float64, kiln.bfloat16):
        got = V.adaptive_avg_pool3d(t(x, dtype), output_size)
        want, _ = adaptive_reference(t(x, dtype).to(kiln.float64).numpy(), outs, maximum=False)
        assert got.dtype == dtype
        rtol, atol = TOLERANCES[dtype]
        np.testing.assert_allclose(got.to(kiln.float64).numpy(), want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", [kiln.float16, kiln.bfloat16])
def test_conv_transpose3d_of_16_bit_floats_is_rounded_once(dtype, rng):
    x, w, b = (t(rng.uniform(-1, 1, size=s), dtype) for s in ((2, 2, 3, 3, 3), (2, 3, 3, 2, 2),
                                                                (3,)))
    got = V.conv_transpose3d(x, w, b, 2, 1)
    want = conv_transpose3d_reference(*(v.to(kiln.float64).numpy() for v in (x, w, b)), 2, 1,
                                      0, 1, 1)
    assert got.dtype == dtype
    np.testing.assert_allclose(got.to(kiln.float64).numpy(), want, rtol=TOLERANCES[dtype][0],
                               atol=TOLERANCES[dtype][1] * 4)


def test_one_sample_is_computed_as_a_batch_of_one(rng):
    x, w, wt = (t(rng.standard_normal(s)) for s in ((3, 5, 6, 4), (2, 3, 2, 3, 3), (3, 2, 2, 2, 2)))
    calls = [lambda v: V.conv3d(v, w, None, 1, "same"),
             lambda v: V.conv_transpose3d(v, wt, None, 2, 1, 1),
             lambda v: V.max_pool3d(v, 2, 1, 1, return_indices=True),
             lambda v: V.avg_pool3d(v, 3, 2, 1, True, False),
             lambda v: V.adaptive_avg_pool3d(v, (2, None, 3)),
             lambda v: V.adaptive_max_pool3d(v, 3, True)]
    for call in calls:
        one, batch = call(x), call(mint.unsqueeze(x, 0))
        for ours, want in zip(one if isinstance(one, tuple) else (one,),
                              batch if isinstance(batch, tuple) else (batch,)):
            assert tuple(ours.shape) == tuple(want.shape[1:])
            np.testing.assert_array_equal(ours.numpy(), want.numpy()[0])


# ------------------------------------------------------------------------------------------------
# Against PyTorch: values, indices and the gradients of every tensor argument


TORCH_CASES = [
    ("conv3d", (2, 4, 5, 6, 5), (6, 2, 3, 2, 3), dict(stride=(2, 1, 1), padding=(1, 0, 1),
                                                      dilation=(1, 2, 1), groups=2)),
    ("conv3d", (2, 2, 4, 5, 4), (3, 2, 2, 3, 2), dict(padding="same", dilation=(3, 1, 1))),
    ("conv_transpose3d", (2, 4, 3, 3, 2), (4, 2, 3, 2, 3),
     dict(stride=(2, 1, 3), padding=(1, 0, 1), output_padding=(1, 0, 2), groups=2)),
    ("conv_transpose3d", (1, 2, 2, 3, 3), (2, 3, 2, 2, 2),
     dict(stride=1, padding=(2, 0, 0), output_padding=(1, 0, 0), dilation=(2, 1, 1))),
]


@pytest.mark.parametrize("name, shape, w_shape, kwargs", TORCH_CASES, ids=str)
@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel lengths")  # PyTorch's
def test_convolutions_match_pytorch(torch, name, shape, w_shape, kwargs, rng):
    groups = kwargs.get("groups", 1)
    out_channels = w_shape[0] if name == "conv3d" else w_shape[1] * groups
    arrays = [rng.standard_normal(s) for s in (shape, w_shape, (out_channels,))]
    ours = [t(a).requires_grad_() for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    out = getattr(V, name)(*ours, **kwargs)
    want = getattr(torch.nn.functional, name)(*theirs, **kwargs)
    check_torch(out, want, kiln.float64, "value")
    upstream = rng.uniform(0.5, 2, size=tuple(want.shape))
    grads = kiln.autograd.grad(out, ours, t(upstream))
    wants = torch.autograd.grad(want, theirs, torch.tensor(upstream))
    for what, grad, expected in zip(("input", "weight", "bias"), grads, wants):
        check_torch(grad, expected, kiln.float64, f"gradient of {what}")


POOL_CASES = [
    ("max_pool3d", dict(kernel_size=(2, 3, 2), stride=(2, 1, 2), padding=(1, 1, 0),
                        dilation=(2, 1, 2), ceil_mode=True, return_indices=True)),
    ("max_pool3d", dict(kernel_size=3, stride=2, padding=1)),
    ("avg_pool3d", dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                        count_include_pad=False)),
    ("avg_pool3d", dict(kernel_size=(2, 3, 3), stride=(1, 2, 2), padding=1, divisor_override=7)),
    ("adaptive_avg_pool3d", dict(output_size=(3, None, 4))),
    ("adaptive_max_pool3d", dict(output_size=(4, 2, 3), return_indices=True)),
    ("adaptive_max_pool3d", dict(output_size=(2, 3, 5))),
]


@pytest.mark.parametrize("name, kwargs", POOL_CASES, ids=str)
@pytest.mark.parametrize("ties", [False, True], ids=["distinct", "ties"])
def test_poolings_match_pytorch(torch, name, kwargs, ties, rng):
    shape = (2, 3, 7, 6, 5)
    x = (rng.integers(0, 4, size=shape).astype(np.float64) if ties
         else rng.standard_normal(shape))
    ours, theirs = t(x).requires_grad_(), torch.tensor(x, requires_grad=True)
    out = getattr(V, name)(ours, **kwargs)
    want = getattr(torch.nn.functional, name)(theirs, **kwargs)
    if kwargs.get("return_indices"):
        np.testing.assert_array_equal(out[1].numpy(), want[1].numpy())
        out, want = out[0], want[0]
    check_torch(out, want, kiln.float64, "value")
    # The gradient goes to the element PyTorch's does, ties included.
    upstream = rng.uniform(0.5, 2, size=tuple(want.shape))
    (grad,) = kiln.autograd.grad(out, [ours], t(upstream))
    (expected,) = torch.autograd.grad(want, [theirs], torch.tensor(upstream))
    check_torch(grad, expected, kiln.float64, "gradient of input")


# ------------------------------------------------------------------------------------------------
# The cells


def test_cells_have_pytorchs_parameters_state_dict_and_repr(torch):
    pairs = [
        (Conv3d(4, 6, (3, 2, 1), stride=2, padding=1, groups=2),
         torch.nn.Conv3d(4, 6, (3, 2, 1), stride=2, padding=1, groups=2)),
        (Conv3d(2, 3, 3, bias=False, padding="same", padding_mode="reflect"),
         torch.nn.Conv3d(2, 3, 3, bias=False, padding="same", padding_mode="reflect")),
        (ConvTranspose3d(4, 6, 2, stride=2, output_padding=1, groups=2, dilation=2),
         torch.nn.ConvTranspose3d(4, 6, 2, stride=2, output_padding=1, groups=2, dilation=2)),
        (BatchNorm3d(5), torch.nn.BatchNorm3d(5)),
        (BatchNorm3d(5, affine=False, track_running_stats=False),
         torch.nn.BatchNorm3d(5, affine=False, track_running_stats=False)),
    ]
    for ours, theirs in pairs:
        want = theirs.state_dict()
        got = ours.state_dict()
        assert list(got) == list(want)
        for key in want:
            assert tuple(got[key].shape) == tuple(want[key].shape), key
            assert got[key].dtype.name == str(want[key].dtype).replace("torch.", ""), key
        assert ours.load_state_dict(want) == ([], [])
    pools = [(MaxPool3d(2), torch.nn.MaxPool3d(2)),
             (MaxPool3d((1, 2, 2), (1, 2, 1), 0, 2, True, True),
              torch.nn.MaxPool3d((1, 2, 2), (1, 2, 1), 0, 2, True, True)),
             (AvgPool3d(3, 2, 1, True, False, 4), torch.nn.AvgPool3d(3, 2, 1, True, False, 4)),
             (AdaptiveAvgPool3d((2, None, 3)), torch.nn.AdaptiveAvgPool3d((2, None, 3))),
             (AdaptiveMaxPool3d(4, True), torch.nn.AdaptiveMaxPool3d(4, True))]
    for ours, theirs in pools:
        assert repr(ours) == repr(theirs)
        assert ours.state_dict() == {} and list(ours.parameters()) == []
    assert repr(MaxPool3d(2)) == ("MaxPool3d(kernel_size=2, stride=2, padding=0, dilation=1, "
                                  "ceil_mode=False)")
    assert repr(Conv3d(2, 4, 3)) == ("Conv3d(2, 4, kernel_size=(3, 3, 3), stride=(1, 1, 1), "
                                     "padding=(0, 0, 0), dilation=(1, 1, 1), groups=1, "
                                     "bias=True)")
    assert repr(BatchNorm3d(3)) == ("BatchNorm3d(3, eps=1e-05, momentum=0.1, affine=True, "
                                    "track_running_stats=True)")


@pytest.mark.parametrize("make, fan_in", [
    (lambda: Conv3d(4, 6, (3, 2, 1), groups=2), 2 * 3 * 2 * 1),
    (lambda: ConvTranspose3d(4, 6, (2, 3, 2), groups=2), 3 * 2 * 3 * 2),
])
def test_convolutions_are_initialised_as_pytorchs(make, fan_in):
    kiln.manual_seed(0)
    cell = make()
    # kaiming_uniform_(a=sqrt(5)) and the bias both give U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    bound = 1 / math.sqrt(fan_in)
    for param in (cell.weight, cell.bias):
        values = param.numpy()
        assert values.min() >= -bound and values.max() <= bound
        assert values.max() - values.min() > bound  # spread over the range, not constant
    assert BatchNorm3d(3).weight.numpy().tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("name, args, kwargs", [
    ("Conv3d", (4, 6, (3, 2, 2)), dict(stride=(2, 1, 1), padding=(1, 0, 1), dilation=(1, 2, 1),
                                       groups=2)),
    ("Conv3d", (4, 2, 3), dict(padding="same", padding_mode="circular")),
    ("Conv3d", (4, 2, (2, 3, 2)), dict(padding=(1, 2, 1), padding_mode="replicate")),
    ("ConvTranspose3d", (4, 2, (3, 2, 2)), dict(stride=2, padding=1, output_padding=(1, 0, 1))),
    ("BatchNorm3d", (4,), {}),
], ids=str)
def test_cells_match_pytorch(torch, name, args, kwargs, rng):
    from kiln import nn
    ours = getattr(nn, name, None) or globals()[name]
    ours = ours(*args, **kwargs, dtype=kiln.float64)
    theirs = getattr(torch.nn, name)(*args, **kwargs, dtype=torch.float64)
    ours.load_state_dict(theirs.state_dict())
    check_cell_against_torch(torch, ours, theirs, rng.standard_normal((2, 4, 5, 6, 5)), rng)
    if name == "BatchNorm3d":  # the running statistics of that training step, then eval mode
        for buffer in ("running_mean", "running_var", "num_batches_tracked"):
            check_torch(getattr(ours, buffer), getattr(theirs, buffer), kiln.float64, buffer)
        ours.eval(), theirs.eval()
        check_cell_against_torch(torch, ours, theirs, rng.standard_normal((3, 4, 2, 3, 2)), rng)


def test_conv_transpose3d_cell_takes_an_output_size(rng):
    up = ConvTranspose3d(2, 3, 3, stride=(2, 3, 2), padding=1, dtype=kiln.float64)
    x = t(rng.standard_normal((2, 2, 3, 4, 3)))
    smallest = up(x)
    assert tuple(smallest.shape) == (2, 3, 5, 10, 5)
    for size in ([6, 12, 5], [2, 3, 6, 11, 6]):
        out = up(x, output_size=size)
        assert tuple(out.shape[2:]) == tuple(size[-3:])
        # output_padding adds rows and columns after the smallest output, which it keeps.
        np.testing.assert_allclose(out.numpy()[:, :, :5, :10, :5], smallest.numpy(), rtol=1e-12)
    assert tuple(up(x[0], output_size=[3, 6, 10, 5]).shape) == (3, 6, 10, 5)
    with raises(KilnValueError, match=r"requested an output size of \[7, 10, 5\], but valid "
                                      r"sizes range from \[5, 10, 5\] to \[6, 12, 6\]"):
        up(x, output_size=[7, 10, 5])


# ------------------------------------------------------------------------------------------------
# kiln.jit


def _first(result):
    return result[0] if isinstance(result, tuple) else result


JITTED = {
    "conv3d": lambda x, w: V.conv3d(x, w, None, (2, 1, 1), "valid", 1, 1),
    "conv3d same": lambda x, w: V.conv3d(x, w[:, :2], None, 1, "same", (2, 1, 1), 2),
    "conv_transpose3d": lambda x, w: V.conv_transpose3d(x, w.transpose(0, 1), None, 2, 1, 1),
    "max_pool3d": lambda x, w: V.max_pool3d(x, 3, 2, 1, (1, 2, 1), True, True),
    "avg_pool3d": lambda x, w: V.avg_pool3d(x, 3, 2, 1, True, False, None),
    "adaptive_avg_pool3d": lambda x, w: V.adaptive_avg_pool3d(x, (3, 2, 4)),
    "adaptive_max_pool3d": lambda x, w: V.adaptive_max_pool3d(x, (3, 4, 2), True),
}


@pytest.mark.parametrize("name", JITTED)
def test_functions_under_jit_match_eager(name, rng):
    fn = JITTED[name]
    x = t(rng.standard_normal((2, 4, 6, 7, 5)).astype(np.float32))
    w = t(rng.standard_normal((4, 4, 3, 2, 3)).astype(np.float32))

    def loss(v, weight):
        return mint.sum(mint.square(_first(fn(v, weight))))

    jitted, jitted_grad = kiln.jit(fn), kiln.jit(kiln.grad(loss, (0, 1)))
    eager, eager_grads = fn(x, w), kiln.grad(loss, (0, 1))(x, w)
    for _ in range(2):  # the trace, then the compiled graph
        got = jitted(x, w)
        for ours, want in zip(got if isinstance(got, tuple) else (got,),
                              eager if isinstance(eager, tuple) else (eager,)):
            np.testing.assert_allclose(ours.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
        # The gradients reach ~1e3 and cancel: float32 rounding at that scale may differ from run
        # to run (oneDNN's reductions are split over threads).
        for ours, want in zip(jitted_grad(x, w), eager_grads):
            scale = max(1.0, float(np.abs(want.numpy()).max()))
            np.testing.assert_allclose(ours.numpy(), want.numpy(), rtol=1e-5, atol=1e-6 * scale)


def test_a_volumetric_net_under_a_dynamic_jit_matches_eager(rng):
    from kiln import nn
    net = nn.Sequential(Conv3d(2, 4, 3, padding=1), BatchNorm3d(4), nn.ReLU(),
                        MaxPool3d(2, ceil_mode=True), ConvTranspose3d(4, 3, 2, stride=2),
                        AvgPool3d(2, 1, 1), AdaptiveMaxPool3d((2, 1, 3)))
    net.eval()
    jitted = kiln.jit(net, dynamic=True)
    for batch in (2, 3, 4, 6):
        x = t(rng.standard_normal((batch, 2, 5, 4, 5)).astype(np.float32))
        np.testing.assert_allclose(jitted(x).numpy(), net(x).numpy(), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------------------------
# Errors


def _volume(*shape, dtype=kiln.float32):
    return mint.zeros(shape, dtype=dtype)


W = _volume(4, 2, 3, 3, 3)


@pytest.mark.parametrize("call, error, message", [
    (lambda: V.conv3d(_volume(2, 5, 5), W), ShapeError,
     r"conv3d: expected input \[N, C_in, D, H, W\] or one sample \[C_in, D, H, W\], got "
     r"\[2, 5, 5\]"),
    (lambda: V.conv3d(_volume(1, 3, 5, 5, 5), W), ShapeError,
     r"weight \[C_out, C_in / groups, kD, kH, kW\] .* got input \[1, 3, 5, 5, 5\] and weight "
     r"\[4, 2, 3, 3, 3\]"),
    (lambda: V.conv3d(_volume(1, 4, 5, 5, 5), W, groups=3), ShapeError, "groups = 3"),
    (lambda: V.conv3d(_volume(1, 2, 5, 5, 5), W, _volume(3)), ShapeError,
     r"expected bias \[C_out = 4\], got \[3\]"),
    (lambda: V.conv3d(_volume(1, 2, 2, 5, 5), W), ShapeError,
     r"padded input's depth, height and width \[2, 5, 5\] to be at least the dilated "
     r"kernel's \[3, 3, 3\]"),
    (lambda: V.conv3d(_volume(1, 2, 5, 5, 5, dtype=kiln.float64), W), DTypeError,
     "expected input of dtype float32"),
    (lambda: V.conv3d(_volume(1, 2, 5, 5, 5), W, stride=2, padding="same"), KilnValueError,
     r"padding='same' needs stride 1"),
    (lambda: V.conv3d(_volume(1, 2, 5, 5, 5), W, padding="full"), KilnValueError,
     "expected padding 'same', 'valid'"),
    (lambda: V.conv3d(_volume(1, 2, 5, 5, 5), W, stride=(1, 2)), KilnValueError,
     "stride to be an int or a sequence of three ints, got 2 sizes"),
    (lambda: V.conv3d(_volume(1, 2, 5, 5, 5), W, dilation=0), KilnValueError,
     "expected dilation >= 1"),
    (lambda: V.conv_transpose3d(_volume(1, 4, 2, 2, 2), W, output_padding=(0, 1, 0)),
     KilnValueError, r"output_padding below the stride or the dilation .* \[0, 1, 0\]"),
    (lambda: V.conv_transpose3d(_volume(1, 4, 1, 2, 2), W, padding=(2, 0, 0)), ShapeError,
     r"expected an output of positive sizes, got depth, height and width \[-1, 4, 4\]"),
    (lambda: V.conv_transpose3d(_volume(1, 2, 2, 2, 2), W), ShapeError,
     r"weight \[C_in, C_out / groups, kD, kH, kW\]"),
    (lambda: V.max_pool3d(_volume(1, 1, 4, 4, 4), 2, padding=(2, 1, 1)), KilnValueError,
     r"expected padding at most half the kernel size, got padding \[2, 1, 1\] for "
     r"kernel_size \[2, 2, 2\]"),
    (lambda: V.max_pool3d(_volume(1, 1, 2, 4, 4), 3), ShapeError,
     r"max_pool3d: the padded input depth \(2\) holds no window of the dilated kernel depth "
     r"\(3\)"),
    (lambda: V.avg_pool3d(_volume(1, 1, 4, 1, 4), 3, 2, ceil_mode=True), ShapeError,
     r"avg_pool3d: the padded input height \(1\) holds no window of the dilated kernel height "
     r"\(3\); expected at least 2 with ceil_mode"),
    (lambda: V.max_pool3d(_volume(1, 4, 4, 4), 2, ceil_mode=1), KilnTypeError,
     "ceil_mode must be a bool"),
    (lambda: V.max_pool3d(_volume(1, 1, 4, 4, 4), "2"), KilnTypeError,
     "kernel_size to be an int or a sequence of three ints, got str"),
    (lambda: V.avg_pool3d(_volume(1, 1, 4, 4, 4, dtype=kiln.int32), 2), DTypeError,
     "avg_pool3d: expected a floating-point input, got int32"),
    (lambda: V.avg_pool3d(_volume(1, 1, 4, 4, 4), 2, divisor_override=0), KilnValueError,
     "expected a nonzero divisor_override, got 0"),
    (lambda: V.avg_pool3d(_volume(2, 4, 4, 4, 4, 4), 2), ShapeError,
     r"avg_pool3d: expected input \[N, C_in, D, H, W\]"),
    (lambda: V.adaptive_avg_pool3d(_volume(1, 1, 0, 4, 4), 2), ShapeError,
     r"non-zero sizes in every dimension but the batch's, got \[1, 1, 0, 4, 4\]"),
    (lambda: V.adaptive_max_pool3d(_volume(1, 1, 4, 4, 4), (2, 2)), KilnValueError,
     "output_size to be an int or a sequence of three"),
    (lambda: V.adaptive_max_pool3d(_volume(1, 1, 4, 4, 4), 2.0), KilnTypeError,
     "output_size to be an int or a sequence of three ints or None, got float"),
    (lambda: V.adaptive_avg_pool3d(_volume(1, 1, 4, 4, 4), (2, -1, 2)), KilnValueError,
     "output_size"),
    (lambda: Conv3d(2, 4, (3, 3)), KilnValueError,
     r"Conv3d: kernel_size must be an int or a tuple of three ints, got \(3, 3\)"),
    (lambda: Conv3d(2, 4, 3)(_volume(3, 5, 5, 5)), ShapeError,
     r"conv3d: .*weight \[C_out, C_in / groups, kD, kH, kW\] .* got input \[1, 3, 5, 5, 5\]"),
    (lambda: Conv3d(2, 4, 3)(_volume(2, 5, 5)), ShapeError,
     r"Conv3d: expected input \[N, C_in, D, H, W\] or one sample \[C_in, D, H, W\]"),
    (lambda: MaxPool3d(2)(_volume(2, 5, 5)), ShapeError,
     r"max_pool3d: expected input \[N, C_in, D, H, W\]"),
    (lambda: ConvTranspose3d(2, 4, 3, padding="same"), KilnValueError,
     "a transposed convolution takes no padding string"),
    (lambda: ConvTranspose3d(2, 4, 3)(_volume(2, 2, 3, 3, 3), output_size=[5, 5]),
     KilnValueError, r"output_size must be \[D_out, H_out, W_out\] or \[N, C_out, D_out, "
                     r"H_out, W_out\]"),
    (lambda: BatchNorm3d(3)(_volume(2, 3, 4, 4)), ShapeError,
     r"BatchNorm3d: expected a 5-D \[N, C, D, H, W\] input, got shape \[2, 3, 4, 4\]"),
    (lambda: AdaptiveMaxPool3d((1, 2)), KilnValueError, "AdaptiveMaxPool3d: expected output_size"),
    (lambda: AvgPool3d(2, divisor_override=0)(_volume(1, 1, 2, 2, 2)), KilnValueError,
     "avg_pool3d: expected a nonzero divisor_override"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_argument_errors(call, error, message):
    with raises(error, match=message):
        call()
