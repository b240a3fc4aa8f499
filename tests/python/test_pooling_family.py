"""PyTorch's pooling family in kiln.nn (kiln/nn/functional.py, kiln/nn/pooling.py and
adaptive_max_pool2d's indices in kiln/mint/_composite.py): max_pool1d / max_pool2d with
return_indices, avg_pool1d, avg_pool2d's divisor_override, the 1-d adaptive poolings,
adaptive_max_pool2d's indices, max_unpool1d / max_unpool2d and their cells, batched and unbatched.
Against PyTorch (values, indices and gradients) where it is installed, and against NumPy scans of
each window everywhere; under kiln.jit; and their argument errors."""

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from conftest import check_torch, raises, random_array, t, torch_twin
from kiln.nn.pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveMaxPool1d,
                             AdaptiveMaxPool2d, AvgPool1d, AvgPool2d, MaxPool1d, MaxPool2d,
                             MaxUnpool1d, MaxUnpool2d)

mint = kiln.mint
FLOATS = [kiln.float32, kiln.float64, kiln.bfloat16]
INTS = [kiln.int32, kiln.int64, kiln.uint8]
# The input's shape per number of spatial dimensions; unbatched inputs drop the 2.
SHAPES = {1: (2, 3, 11), 2: (2, 3, 7, 9)}
BATCHED = pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])

# Pooling geometries (stride, padding, dilation, ceil_mode), in each function's own spelling.
POOLS_1D = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
            dict(kernel_size=(3,), stride=(1,), padding=(1,), ceil_mode=True),
            dict(kernel_size=4, stride=3, ceil_mode=True)]
MAX_POOLS_1D = POOLS_1D + [dict(kernel_size=3, stride=1, padding=1, dilation=2),
                           dict(kernel_size=2, stride=2, dilation=3, ceil_mode=True)]
POOLS_2D = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
            dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 1), ceil_mode=True),
            dict(kernel_size=3, stride=2, ceil_mode=True)]
MAX_POOLS_2D = POOLS_2D + [dict(kernel_size=(2, 3), stride=1, padding=1, dilation=(2, 1)),
                           dict(kernel_size=2, padding=1, dilation=2, ceil_mode=True)]
MAX_POOLS = [(1, kwargs) for kwargs in MAX_POOLS_1D] + [(2, kwargs) for kwargs in MAX_POOLS_2D]
AVG_POOLS = [(1, kwargs) for kwargs in POOLS_1D] + [(2, kwargs) for kwargs in POOLS_2D]
# (spatial input sizes, output_size): uneven and overlapping windows, even ones (the pooling
# ops), an output larger than the input, None keeping a size.
ADAPTIVE = [((11,), 4), ((12,), (4,)), ((5,), 7), ((9,), 1),
            ((7, 9), (3, 4)), ((8, 8), (4, 2)), ((5, 6), (4, None)), ((3, 3), 5)]


def shape_of(spatial, batched):
    shape = SHAPES[spatial]
    return shape if batched else shape[1:]


def planes(*shape):
    return t(np.zeros(shape))


def offsets(*shape, value=0):
    return t(np.full(shape, value, np.int64))


# ------------------------------------------------------------------------------------------------
# Against PyTorch


def matches_torch(torch, ours, theirs, values, dtype, rng):
    """ours(x) against theirs(tx) on ``values`` in ``dtype``: the values, the indices of a pair
    (exactly), and for a floating dtype the gradient of x for a random upstream gradient of the
    values."""
    floating = dtype.is_floating_point
    x = t(values, dtype).requires_grad_() if floating else t(values, dtype)
    tx = torch_twin(torch, values, dtype, floating)
    out, want = ours(x), theirs(tx)
    if isinstance(want, tuple):
        assert isinstance(out, tuple) and len(out) == 2
        (out, indices), (want, want_indices) = out, want
        assert indices.dtype == kiln.int64 and not indices.requires_grad
        np.testing.assert_array_equal(indices.numpy(), want_indices.numpy())
    assert out.dtype == dtype and out.shape == tuple(want.shape)
    if not floating:
        np.testing.assert_array_equal(out.numpy(), want.numpy())
        return
    check_torch(out, want, dtype, "value")
    upstream = random_array(out.shape, dtype, rng, 0.5, 2.0)
    (grad,) = kiln.autograd.grad(out, x, t(upstream, dtype))
    (expected,) = torch.autograd.grad(want, tx, torch_twin(torch, upstream, dtype, False))
    check_torch(grad, expected, dtype, "gradient")


@BATCHED
@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=str)
@pytest.mark.parametrize("spatial, kwargs", MAX_POOLS, ids=str)
def test_max_pool_with_indices_matches_torch(torch, spatial, kwargs, dtype, batched, rng):
    name = f"max_pool{spatial}d"
    values = random_array(shape_of(spatial, batched), dtype, rng)
    matches_torch(torch, lambda x: getattr(F, name)(x, return_indices=True, **kwargs),
                  lambda x: getattr(torch.nn.functional, name)(x, return_indices=True, **kwargs),
                  values, dtype, rng)


@BATCHED
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("count_include_pad", [True, False])
@pytest.mark.parametrize("spatial, kwargs", AVG_POOLS, ids=str)
def test_avg_pool_matches_torch(torch, spatial, kwargs, count_include_pad, dtype, batched, rng):
    name = f"avg_pool{spatial}d"
    values = random_array(shape_of(spatial, batched), dtype, rng)
    matches_torch(torch, lambda x: getattr(F, name)(x, count_include_pad=count_include_pad,
                                                    **kwargs),
                  lambda x: getattr(torch.nn.functional, name)(
                      x, count_include_pad=count_include_pad, **kwargs), values, dtype, rng)


@BATCHED
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("divisor", [1, 5, -3])
@pytest.mark.parametrize("kwargs", POOLS_2D, ids=str)
def test_avg_pool2d_divisor_override_matches_torch(torch, kwargs, divisor, dtype, batched, rng):
    values = random_array(shape_of(2, batched), dtype, rng)
    matches_torch(torch, lambda x: F.avg_pool2d(x, divisor_override=divisor, **kwargs),
                  lambda x: torch.nn.functional.avg_pool2d(x, divisor_override=divisor,
                                                           **kwargs), values, dtype, rng)


@BATCHED
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("kind", ["avg", "max"])
@pytest.mark.parametrize("sizes, output_size", ADAPTIVE, ids=str)
def test_adaptive_pool_matches_torch(torch, sizes, output_size, kind, dtype, batched, rng):
    name = f"adaptive_{kind}_pool{len(sizes)}d"
    extra = dict(return_indices=True) if kind == "max" else {}
    values = random_array((2, 3)[not batched:] + sizes, dtype, rng)
    matches_torch(torch, lambda x: getattr(F, name)(x, output_size, **extra),
                  lambda x: getattr(torch.nn.functional, name)(x, output_size, **extra),
                  values, dtype, rng)


def test_adaptive_max_pool_indices_take_torchs_nan_and_tie(torch):
    # Few levels (ties in every window) and NaNs: the first maximum, else the last NaN.
    values = np.random.default_rng(5).integers(0, 3, size=(2, 3, 7, 9)).astype(np.float32)
    values[0, 0, 1, 1] = values[0, 0, 2, 3] = values[1, 2, 4, 0] = np.nan
    for output_size in ((3, 4), (7, 2), 1, (4, 9)):
        got = F.adaptive_max_pool2d(t(values), output_size, True)
        want = torch.nn.functional.adaptive_max_pool2d(torch.from_numpy(values), output_size,
                                                       True)
        for ours, theirs in zip(got, want):
            np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


# (kernel_size, stride, padding, output_size) of the pooling and of the unpooling after it;
# stride 1 pools overlap, so one index may come twice. An output_size of spatial + 2 sizes is
# [N, C, *sizes], taken by unbatched input too (PyTorch reads its last sizes). The indices are
# offsets in the pooled input's planes, so an output of another width (the default for 7 x 9
# pooled by 2) would put them elsewhere.
UNPOOLS_1D = [(2, None, 0, None), (3, 2, 1, None), (3, 2, 1, (12,)), (3, 1, 1, (2, 3, 11)),
              ((4,), (3,), (1,), [12])]
UNPOOLS_2D = [(2, None, 0, (7, 9)), (3, 2, 1, None), (3, 2, 1, (8, 9)), (3, 1, 1, (2, 3, 7, 9)),
              ((2, 3), (2, 1), (1, 0), [7, 9])]
UNPOOLS = [(1, case) for case in UNPOOLS_1D] + [(2, case) for case in UNPOOLS_2D]


@BATCHED
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("spatial, case", UNPOOLS, ids=str)
def test_max_unpool_matches_torch(torch, spatial, case, dtype, batched, rng):
    kernel_size, stride, padding, output_size = case
    pool, unpool = f"max_pool{spatial}d", f"max_unpool{spatial}d"
    values = random_array(shape_of(spatial, batched), dtype, rng)
    x, indices = getattr(torch.nn.functional, pool)(torch_twin(torch, values, dtype, False),
                                                    kernel_size, stride, padding,
                                                    return_indices=True)
    pooled = x.double().numpy()
    theirs_indices, ours_indices = indices, t(indices.numpy())
    matches_torch(torch, lambda v: getattr(F, unpool)(v, ours_indices, kernel_size, stride,
                                                      padding, output_size),
                  lambda v: getattr(torch.nn.functional, unpool)(
                      v, theirs_indices, kernel_size, stride, padding, output_size),
                  pooled, dtype, rng)


# (kiln cell, its PyTorch twin's name, the twin's arguments); a cell's arguments are its twin's.
CELLS = [
    (MaxPool1d, "MaxPool1d", (3, 2, 1, 1, True)),
    (MaxPool1d, "MaxPool1d", dict(kernel_size=(2,), dilation=2, ceil_mode=True)),
    (AvgPool1d, "AvgPool1d", (3, 2, 1, True, False)),
    (AvgPool1d, "AvgPool1d", dict(kernel_size=(4,), stride=1)),
    (AdaptiveAvgPool1d, "AdaptiveAvgPool1d", (4,)),
    (AdaptiveMaxPool1d, "AdaptiveMaxPool1d", (4, True)),
    (MaxPool2d, "MaxPool2d", (3, 2, 1, 1, True, True)),
    (AvgPool2d, "AvgPool2d", dict(kernel_size=3, stride=2, padding=1, divisor_override=5)),
    (AdaptiveAvgPool2d, "AdaptiveAvgPool2d", ((3, None),)),
    (AdaptiveMaxPool2d, "AdaptiveMaxPool2d", ((3, 4), True)),
    (AdaptiveMaxPool2d, "AdaptiveMaxPool2d", ((2, 3),)),
]


def make(cell, args):
    return cell(**args) if isinstance(args, dict) else cell(*args)


@BATCHED
@pytest.mark.parametrize("cell, twin, args", CELLS, ids=str)
def test_cells_match_torch(torch, cell, twin, args, batched, rng):
    ours, theirs = make(cell, args), make(getattr(torch.nn, twin), args)
    assert repr(ours) == repr(theirs)
    spatial = 1 if cell.__name__.endswith("1d") else 2
    values = random_array(shape_of(spatial, batched), kiln.float64, rng)
    matches_torch(torch, ours, theirs, values, kiln.float64, rng)


@BATCHED
@pytest.mark.parametrize("spatial, args", [(1, (3, 2, 1)), (1, ((2,),)), (2, (2,)),
                                           (2, ((3, 2), 1, (1, 0)))], ids=str)
def test_unpool_cells_match_torch(torch, spatial, args, batched, rng):
    pool, unpool = f"MaxPool{spatial}d", f"MaxUnpool{spatial}d"
    ours = (getattr(kiln.nn.pooling, pool)(*args, return_indices=True),
            getattr(kiln.nn.pooling, unpool)(*args))
    theirs = (getattr(torch.nn, pool)(*args, return_indices=True),
              getattr(torch.nn, unpool)(*args))
    assert repr(ours[1]) == repr(theirs[1])
    values = random_array(shape_of(spatial, batched), kiln.float64, rng)
    size = values.shape[-spatial:]  # the pooled input's sizes, within stride of the default
    matches_torch(torch, lambda x: ours[1](*ours[0](x), output_size=size),
                  lambda x: theirs[1](*theirs[0](x), output_size=size), values, kiln.float64,
                  rng)


# ------------------------------------------------------------------------------------------------
# Against NumPy (no PyTorch needed)


def out_length(size, k, s, p, d, ceil_mode):
    """PyTorch's pooled length."""
    out = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    return out - 1 if ceil_mode and (out - 1) * s >= size + p else out


def numpy_pool1d(x, kind, k, s, p, d=1, ceil_mode=False, count_include_pad=True):
    """A 1-d pooling of x [..., L] by a scan of each window, PyTorch's rules: the first maximum
    (the last NaN) and its offset; the mean over the window clipped to the padded input, or over
    its elements inside the input without count_include_pad."""
    size = x.shape[-1]
    n = out_length(size, k, s, p, d, ceil_mode)
    values, indices = np.zeros(x.shape[:-1] + (n,)), np.zeros(x.shape[:-1] + (n,), np.int64)
    for row in np.ndindex(*x.shape[:-1]):
        for j in range(n):
            start = j * s - p
            inside = [q for q in range(start, start + d * (k - 1) + 1, d) if 0 <= q < size]
            if kind == "avg":
                count = (min(start + k, size + p) - start) if count_include_pad else len(inside)
                values[row + (j,)] = sum(x[row + (q,)] for q in inside) / count
                continue
            best = inside[0]
            for q in inside[1:]:
                if x[row + (q,)] > x[row + (best,)] or np.isnan(x[row + (q,)]):
                    best = q
            values[row + (j,)], indices[row + (j,)] = x[row + (best,)], best
    return values, indices


@BATCHED
@pytest.mark.parametrize("kwargs", MAX_POOLS_1D, ids=str)
def test_max_pool1d_matches_a_scan_of_each_window(kwargs, batched, rng):
    # Few levels: ties in most windows.
    values = rng.integers(0, 4, size=shape_of(1, batched)).astype(np.float64)
    args = [kwargs.get(name, default) for name, default in
            (("kernel_size", None), ("stride", None), ("padding", 0), ("dilation", 1))]
    k, s, p, d = (v[0] if isinstance(v, tuple) else v for v in args)
    want_values, want_indices = numpy_pool1d(values, "max", k, s or k, p, d,
                                             kwargs.get("ceil_mode", False))
    got_values, got_indices = F.max_pool1d(t(values), return_indices=True, **kwargs)
    np.testing.assert_array_equal(got_indices.numpy(), want_indices)
    np.testing.assert_array_equal(got_values.numpy(), want_values)
    np.testing.assert_array_equal(F.max_pool1d(t(values), **kwargs).numpy(), want_values)


@pytest.mark.parametrize("count_include_pad", [True, False])
@pytest.mark.parametrize("kwargs", POOLS_1D, ids=str)
def test_avg_pool1d_matches_window_means(kwargs, count_include_pad, rng):
    values = rng.standard_normal(SHAPES[1])
    args = [kwargs.get(name, default) for name, default in
            (("kernel_size", None), ("stride", None), ("padding", 0))]
    k, s, p = (v[0] if isinstance(v, tuple) else v for v in args)
    want, _ = numpy_pool1d(values, "avg", k, s or k, p, 1, kwargs.get("ceil_mode", False),
                           count_include_pad)
    got = F.avg_pool1d(t(values), count_include_pad=count_include_pad, **kwargs)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


def numpy_adaptive_max(x, out_h, out_w):
    """adaptive_max_pool2d's (values, indices) of x [..., H, W] by a row-major scan of each
    window: the first maximum, or the last NaN."""
    height, width = x.shape[-2:]
    values = np.zeros(x.shape[:-2] + (out_h, out_w), x.dtype)
    indices = np.zeros(values.shape, np.int64)
    for plane in np.ndindex(*x.shape[:-2]):
        for i in range(out_h):
            rows = range(i * height // out_h, -(-(i + 1) * height // out_h))
            for j in range(out_w):
                cols = range(j * width // out_w, -(-(j + 1) * width // out_w))
                best = None
                for r in rows:
                    for c in cols:
                        v = x[plane + (r, c)]
                        if best is None or v > x[plane + best] or np.isnan(v):
                            best = (r, c)
                values[plane + (i, j)] = x[plane + best]
                indices[plane + (i, j)] = best[0] * width + best[1]
    return values, indices


@pytest.mark.parametrize("dtype", [kiln.float64, kiln.bfloat16], ids=str)
@pytest.mark.parametrize("shape, output_size", [
    ((2, 3, 7, 9), (3, 4)), ((3, 5, 6), (4, 5)), ((1, 2, 10, 7), (3, 7)), ((2, 2, 3, 3), 5),
    ((1, 2, 8, 8), (4, 2)), ((2, 6, 6), 1)], ids=str)
def test_adaptive_max_pool2d_indices_match_a_scan_of_each_window(shape, output_size, dtype,
                                                                 rng):
    values = rng.integers(0, 3, size=shape).astype(np.float64)  # ties everywhere
    planes = values.reshape((-1,) + shape[-2:])
    planes[0, 1, 1] = planes[-1, 2, 2] = planes[-1, 2, 0] = np.nan
    out_h, out_w = (output_size, output_size) if isinstance(output_size, int) else output_size
    want_values, want_indices = numpy_adaptive_max(values, out_h, out_w)
    x = t(values, dtype).requires_grad_()
    got_values, got_indices = F.adaptive_max_pool2d(x, output_size, return_indices=True)
    assert got_values.dtype == dtype and got_indices.dtype == kiln.int64
    np.testing.assert_array_equal(got_indices.numpy(), want_indices)
    np.testing.assert_array_equal(got_values.float().numpy(), want_values)
    # The gradient goes to the indexed element of each window alone.
    upstream = rng.integers(1, 4, size=want_values.shape).astype(np.float64)
    (grad,) = kiln.autograd.grad(got_values, x, t(upstream, dtype))
    want_grad = np.zeros((int(np.prod(shape[:-2])), shape[-2] * shape[-1]))
    for plane, (at, g) in enumerate(zip(want_indices.reshape(len(want_grad), -1),
                                        upstream.reshape(len(want_grad), -1))):
        np.add.at(want_grad[plane], at, g)
    np.testing.assert_array_equal(grad.float().numpy(), want_grad.reshape(shape))


@pytest.mark.parametrize("sizes, output_size", ADAPTIVE[:4], ids=str)
def test_adaptive_1d_poolings_are_the_2d_ones_over_one_row(sizes, output_size, rng):
    values = rng.standard_normal((2, 3) + sizes)
    (size,) = (output_size,) if isinstance(output_size, int) else output_size
    want_values, want_indices = numpy_adaptive_max(values[:, :, None], 1, size)
    got_values, got_indices = F.adaptive_max_pool1d(t(values), output_size, True)
    np.testing.assert_array_equal(got_indices.numpy(), want_indices[:, :, 0])
    np.testing.assert_array_equal(got_values.numpy(), want_values[:, :, 0])
    want_means = [values[..., i * sizes[0] // size:-(-(i + 1) * sizes[0] // size)].mean(-1)
                  for i in range(size)]
    np.testing.assert_allclose(F.adaptive_avg_pool1d(t(values), output_size).numpy(),
                               np.stack(want_means, -1), rtol=1e-12)


@BATCHED
@pytest.mark.parametrize("spatial, case", UNPOOLS, ids=str)
def test_unpooling_a_pool_puts_each_maximum_at_its_index(spatial, case, batched, rng):
    kernel_size, stride, padding, output_size = case
    max_pool, max_unpool = getattr(F, f"max_pool{spatial}d"), getattr(F, f"max_unpool{spatial}d")
    shape = shape_of(spatial, batched)
    values = rng.permutation(int(np.prod(shape))).reshape(shape).astype(np.float64)
    pooled, indices = max_pool(t(values), kernel_size, stride, padding, return_indices=True)
    x = pooled.detach().requires_grad_()
    out = max_unpool(x, indices, kernel_size, stride, padding, output_size)
    lead = shape[:-spatial]
    if output_size is None:  # PyTorch's default: (in - 1) * stride - 2 * padding + kernel
        k, s, p = (np.broadcast_to(v, spatial) for v in (kernel_size, stride or kernel_size,
                                                         padding))
        sizes = tuple((n - 1) * s_ + k_ - 2 * p_
                      for n, k_, s_, p_ in zip(pooled.shape[-spatial:], k, s, p))
    else:
        sizes = tuple(output_size[-spatial:])
    assert out.shape == lead + sizes and out.dtype == kiln.float64
    # Each maximum at its offset in the output's plane, zeros elsewhere.
    flat_out = out.numpy().reshape(lead + (-1,))
    flat_at = indices.numpy().reshape(lead + (-1,))
    flat_pooled = pooled.numpy().reshape(lead + (-1,))
    np.testing.assert_array_equal(np.take_along_axis(flat_out, flat_at, -1), flat_pooled)
    put = np.zeros(flat_out.shape, bool)
    np.put_along_axis(put, flat_at, True, -1)
    assert np.all(flat_out[~put] == 0)
    # The gradient of the input is the output's gradient at the indices.
    upstream = rng.standard_normal(out.shape)
    (grad,) = kiln.autograd.grad(out, x, t(upstream))
    np.testing.assert_array_equal(
        grad.numpy(), np.take_along_axis(upstream.reshape(lead + (-1,)), flat_at,
                                         -1).reshape(pooled.shape))


@pytest.mark.parametrize("dtype", [kiln.int32, kiln.uint8, kiln.float32], ids=str)
def test_max_pools_and_unpool_keep_integer_dtypes(dtype, rng):
    values = random_array((2, 3, 11), dtype, rng)
    pooled, indices = F.max_pool1d(t(values, dtype), 3, 2, 1, return_indices=True)
    want, want_indices = numpy_pool1d(values.astype(np.float64), "max", 3, 2, 1)
    assert pooled.dtype == dtype
    np.testing.assert_array_equal(pooled.numpy(), want)
    np.testing.assert_array_equal(indices.numpy(), want_indices)
    out = F.max_unpool1d(pooled, indices, 3, 2, 1)
    assert out.dtype == dtype and out.shape == (2, 3, 11)
    np.testing.assert_array_equal(np.take_along_axis(out.numpy(), want_indices, -1), want)


@pytest.mark.parametrize("call, shape", [
    (lambda x: F.max_pool1d(x[..., 0, :], 3, 2, 1, return_indices=True), (0, 2, 6)),
    (lambda x: F.avg_pool1d(x[..., 0, :], 3, 2, 1), (0, 2, 6)),
    (lambda x: F.adaptive_max_pool1d(x[..., 0, :], 4, True), (0, 2, 4)),
    (lambda x: F.adaptive_max_pool2d(x, (3, 4), True), (0, 2, 3, 4)),
    (lambda x: F.max_unpool2d(*F.max_pool2d(x, 2, return_indices=True), 2, output_size=(7, 11)),
     (0, 2, 7, 11)),
], ids=["max_pool1d", "avg_pool1d", "adaptive_max_pool1d", "adaptive_max_pool2d",
        "max_unpool2d"])
def test_an_empty_batch_keeps_its_shape(call, shape):
    out = call(planes(0, 2, 7, 11))
    for part in out if isinstance(out, tuple) else (out,):
        assert part.shape == shape


def test_unpool_output_size_takes_every_size_strictly_within_stride():
    x, indices = F.max_pool2d(t(np.zeros((1, 2, 9, 9))), 3, 3, return_indices=True)
    # The default is 9; PyTorch's rule admits 7 to 11 (strictly between 9 - 3 and 9 + 3).
    for height in range(7, 12):
        out = F.max_unpool2d(x, indices, 3, output_size=(height, 9))
        assert out.shape == (1, 2, height, 9)
        assert MaxUnpool2d(3)(x[0], indices[0], (1, 2, height, 9)).shape == (2, height, 9)


def test_cells_keep_pytorchs_attributes():
    pool = MaxPool1d(3, return_indices=True)
    assert (pool.kernel_size, pool.stride, pool.return_indices) == (3, 3, True)
    avg = AvgPool1d(3, padding=1)
    assert (avg.kernel_size, avg.stride, avg.padding) == ((3,), (3,), (1,))
    assert repr(avg) == "AvgPool1d(kernel_size=(3,), stride=(3,), padding=(1,))"
    assert AvgPool2d(2, divisor_override=3).divisor_override == 3
    unpool = MaxUnpool2d(2, padding=(1, 0))
    assert (unpool.kernel_size, unpool.stride, unpool.padding) == ((2, 2), (2, 2), (1, 0))
    assert repr(unpool) == "MaxUnpool2d(kernel_size=(2, 2), stride=(2, 2), padding=(1, 0))"
    assert repr(MaxUnpool1d(2, 1)) == "MaxUnpool1d(kernel_size=(2,), stride=(1,), padding=(0,))"
    assert repr(AdaptiveMaxPool1d(3, True)) == "AdaptiveMaxPool1d(output_size=3)"
    assert repr(MaxPool2d(2, return_indices=True)) == ("MaxPool2d(kernel_size=2, stride=2, "
                                                       "padding=0, dilation=1, ceil_mode=False)")
    for cell in (pool, avg, unpool, AdaptiveAvgPool1d(2)):
        assert list(cell.parameters()) == [] and list(cell.state_dict()) == []


# ------------------------------------------------------------------------------------------------
# kiln.jit


def _values(result):
    return result[0] if isinstance(result, tuple) else result


def unpool_2d(x):
    return F.max_unpool2d(*F.max_pool2d(x, 3, 2, 1, return_indices=True), 3, 2, 1, (7, 9))


def unpool_1d(x):
    return F.max_unpool1d(*F.max_pool1d(x[:, 0], 2, return_indices=True), 2)


JITTED = {
    "max_pool1d": lambda x: F.max_pool1d(x[:, 0], 3, 2, 1, 2, True, True),
    "max_pool2d": lambda x: F.max_pool2d(x[0], 3, 2, 1, return_indices=True),
    "avg_pool1d": lambda x: F.avg_pool1d(x[:, 0], 3, 2, 1, True, False),
    "avg_pool2d": lambda x: F.avg_pool2d(x, 3, 2, 1, True, False, 4),
    "adaptive_avg_pool1d": lambda x: F.adaptive_avg_pool1d(x[:, 0], 4),
    "adaptive_max_pool1d": lambda x: F.adaptive_max_pool1d(x[:, 0], 4, True),
    "adaptive_max_pool2d": lambda x: F.adaptive_max_pool2d(x, (3, 4), True),
    "adaptive_max_pool2d even": lambda x: F.adaptive_max_pool2d(x[0], (7, 3), True),
    "max_unpool1d": unpool_1d,
    "max_unpool2d": unpool_2d,
    "cells": lambda x: MaxUnpool1d(2)(*MaxPool1d(2, return_indices=True)(
        AdaptiveMaxPool2d((2, 6))(x)[:, 0])),
}


@pytest.mark.parametrize("name", JITTED)
def test_functions_under_jit_match_eager(name, rng):
    fn = JITTED[name]
    x = t(random_array((2, 3, 7, 9), kiln.float32, rng))

    def loss(v):
        return mint.sum(mint.square(_values(fn(v))))

    jitted, jitted_grad = kiln.jit(fn), kiln.jit(kiln.grad(loss))
    eager = fn(x)
    for _ in range(2):  # the trace, then the compiled graph
        got = jitted(x)
        for ours, want in zip(got if isinstance(got, tuple) else (got,),
                              eager if isinstance(eager, tuple) else (eager,)):
            np.testing.assert_allclose(ours.numpy(), want.numpy(), rtol=1e-6)
        np.testing.assert_allclose(jitted_grad(x).numpy(), kiln.grad(loss)(x).numpy(),
                                   rtol=1e-6)


def test_adaptive_max_pool2d_indices_under_jit_with_a_dynamic_batch(rng):
    pool = kiln.jit(lambda v: F.adaptive_max_pool2d(v, (3, 4), True), dynamic=True)
    for batch in (1, 2, 3, 5):
        x = t(random_array((batch, 2, 7, 9), kiln.float32, rng))
        for ours, want in zip(pool(x), F.adaptive_max_pool2d(x, (3, 4), True)):
            np.testing.assert_array_equal(ours.numpy(), want.numpy())


# ------------------------------------------------------------------------------------------------
# Errors


@pytest.mark.parametrize("call, error, message", [
    # max_unpool's output_size, PyTorch's range and lengths.
    (lambda: F.max_unpool2d(planes(1, 1, 2, 2), offsets(1, 1, 2, 2), 2, output_size=(6, 4)),
     kiln.KilnValueError, r"max_unpool2d: invalid output_size \(6, 4\): expected spatial "
                          r"dimension 0 strictly between 2 and 6, got 6"),
    (lambda: F.max_unpool1d(planes(1, 2, 3), offsets(1, 2, 3), 2, output_size=[4]),
     kiln.KilnValueError, "strictly between 4 and 8, got 4"),
    (lambda: F.max_unpool2d(planes(1, 1, 2, 2), offsets(1, 1, 2, 2), 2, output_size=(4,)),
     kiln.KilnValueError, r"max_unpool2d: expected output_size of 2 or 4 sizes, got 1: \(4,\)"),
    (lambda: F.max_unpool2d(planes(1, 1, 2, 2), offsets(1, 1, 2, 2), 2, output_size=4),
     kiln.KilnTypeError, "expected output_size to be None or a sequence of ints, got int 4"),
    (lambda: F.max_unpool2d(planes(1, 1, 2, 2), offsets(1, 1, 2, 2), 2, output_size=(4, 4.0)),
     kiln.KilnTypeError, "max_unpool2d: output_size must be an int, got float 4.0"),
    (lambda: MaxUnpool2d(2)(planes(1, 1, 2, 2), offsets(1, 1, 2, 2), (1, 1, 4, 7)),
     kiln.KilnValueError, "dimension 1 strictly between 2 and 6, got 7"),
    # Indices outside the output's plane, of another shape or dtype.
    (lambda: F.max_unpool2d(planes(1, 1, 2, 2), offsets(1, 1, 2, 2, value=16), 2),
     kiln.KilnIndexError, "index 16 is out of bounds for dimension 2 with size 16"),
    (lambda: F.max_unpool1d(planes(2, 3), offsets(2, 3, value=-1), 2),
     kiln.KilnIndexError, "out of bounds for dimension 2 with size 6"),
    (lambda: F.max_unpool2d(planes(1, 1, 2, 2), offsets(1, 1, 2, 1), 2), kiln.ShapeError,
     r"max_unpool2d: expected indices of the input's shape \[1, 1, 2, 2\], got \[1, 1, 2, 1\]"),
    (lambda: F.max_unpool2d(planes(1, 1, 2, 2), t(np.zeros((1, 1, 2, 2), np.int32)), 2),
     kiln.DTypeError, "max_unpool2d: expected int64 indices, got int32"),
    (lambda: F.max_unpool2d(planes(1, 0, 2, 2), offsets(1, 0, 2, 2), 2), kiln.ShapeError,
     "expected input with non-zero sizes in every dimension but the batch's"),
    (lambda: F.max_unpool2d(planes(1, 1, 1, 1), offsets(1, 1, 1, 1), 1, padding=1),
     kiln.ShapeError, "max_unpool2d: expected an output of positive sizes, got"),
    # Ranks.
    (lambda: F.max_unpool2d(planes(2, 2), offsets(2, 2), 2), kiln.ShapeError,
     r"max_unpool2d: expected input \[N, C_in, H, W\] or one sample \[C_in, H, W\], got "
     r"\[2, 2\]"),
    (lambda: F.max_pool1d(planes(1, 1, 2, 4), 2), kiln.ShapeError,
     r"max_pool1d: expected input \[N, C_in, L\] or one sample \[C_in, L\], got \[1, 1, 2, 4\]"),
    (lambda: F.max_pool2d(planes(4, 4), 2, return_indices=True), kiln.ShapeError,
     r"max_pool2d: expected input \[N, C_in, H, W\] or one sample"),
    (lambda: F.avg_pool2d(planes(1, 1, 1, 4, 4), 2), kiln.ShapeError, "avg_pool2d: expected"),
    (lambda: F.adaptive_max_pool1d(planes(4), 2, True), kiln.ShapeError,
     "adaptive_max_pool1d: expected input"),
    (lambda: F.adaptive_avg_pool1d(planes(1, 2, 3, 4), 2), kiln.ShapeError,
     "adaptive_avg_pool1d: expected input"),
    # The 1-d arguments, as PyTorch checks them.
    (lambda: F.max_pool1d(planes(1, 2, 4), (2, 2)), kiln.KilnValueError,
     r"max_pool1d: expected kernel_size to be an int or a sequence of one int, got 2 sizes "
     r"\(2, 2\)"),
    (lambda: F.max_pool1d(planes(1, 2, 4), 0), kiln.KilnValueError,
     "max_pool1d: expected kernel_size >= 1, got 0"),
    (lambda: F.max_pool1d(planes(1, 2, 4), 2, "1"), kiln.KilnTypeError,
     "max_pool1d: expected stride to be an int or a sequence of one int, got str '1'"),
    (lambda: F.max_pool1d(planes(1, 2, 4), 2, 2, 0, (0,)), kiln.KilnValueError,
     "max_pool1d: expected dilation >= 1, got"),
    (lambda: F.avg_pool1d(planes(1, 2, 4), 2, padding=2), kiln.KilnValueError,
     "avg_pool1d: expected padding at most half the kernel size, got padding=2 and "
     "kernel_size=2"),
    (lambda: F.max_pool1d(planes(1, 2, 1), 3, padding=1, dilation=2), kiln.ShapeError,
     r"max_pool1d: the padded input length \(3\) holds no window of the dilated kernel size "
     r"\(5\)"),
    (lambda: F.max_pool1d(planes(1, 2, 4), 2, return_indices=1), kiln.KilnTypeError,
     "max_pool1d: return_indices must be a bool, got int 1"),
    (lambda: F.avg_pool1d(planes(1, 2, 4).to(kiln.int32), 2), kiln.DTypeError,
     "avg_pool1d: expected a floating-point input, got int32"),
    (lambda: F.adaptive_max_pool1d(planes(1, 2, 4), (2, 2)), kiln.KilnValueError,
     "adaptive_max_pool1d: expected output_size to be an int or a sequence of one int, got 2 "
     "sizes"),
    (lambda: F.adaptive_avg_pool1d(planes(1, 2, 4), None), kiln.KilnTypeError,
     "adaptive_avg_pool1d: expected output_size to be an int or a sequence of one int, got "
     "NoneType None"),
    (lambda: F.adaptive_max_pool1d(planes(1, 2, 4), 2, "yes"), kiln.KilnTypeError,
     "adaptive_max_pool1d: return_indices must be a bool, got str 'yes'"),
    (lambda: F.adaptive_max_pool1d(planes(1, 2, 4).to(kiln.int64), 2, True), kiln.DTypeError,
     "adaptive_max_pool1d: expected a floating-point input, got int64"),
    # divisor_override through the function and the cell (kiln.mint.avg_pool2d's checks).
    (lambda: F.avg_pool2d(planes(1, 1, 4, 4), 2, divisor_override=0), kiln.KilnValueError,
     "expected a nonzero divisor_override, got 0"),
    (lambda: AvgPool2d(2, divisor_override=0)(planes(1, 4, 4)), kiln.KilnValueError,
     "expected a nonzero divisor_override, got 0"),
    (lambda: AvgPool2d(2, divisor_override=2.5)(planes(1, 1, 4, 4)), kiln.KilnTypeError,
     "expected divisor_override to be None or an int"),
    # The cells' checks at construction.
    (lambda: MaxUnpool2d(2, (1, 2, 3)), kiln.KilnValueError,
     "MaxUnpool2d: expected stride to be an int or a sequence of two ints, got 3 sizes"),
    (lambda: MaxUnpool1d(0), kiln.KilnValueError, "MaxUnpool1d: expected kernel_size >= 1"),
    (lambda: AvgPool1d((2, 2)), kiln.KilnValueError,
     "AvgPool1d: expected kernel_size to be an int or a sequence of one int"),
    (lambda: AvgPool1d(2, count_include_pad=1), kiln.KilnTypeError,
     "AvgPool1d: count_include_pad must be a bool, got int 1"),
    (lambda: MaxPool1d(2, ceil_mode="no"), kiln.KilnTypeError,
     "MaxPool1d: ceil_mode must be a bool, got str 'no'"),
    (lambda: MaxPool2d(2, return_indices=None), kiln.KilnTypeError,
     "MaxPool2d: return_indices must be a bool, got NoneType None"),
    (lambda: AdaptiveMaxPool1d(3, return_indices=1), kiln.KilnTypeError,
     "AdaptiveMaxPool1d: return_indices must be a bool, got int 1"),
    (lambda: AdaptiveAvgPool1d(-1), kiln.KilnValueError,
     "AdaptiveAvgPool1d: expected output_size >= 0, got -1"),
])
def test_errors(call, error, message):
    with raises(error, match=message):
        call()


def test_a_bad_index_leaves_later_calls_working():
    with raises(kiln.KilnIndexError, match="out of bounds"):
        F.max_unpool2d(planes(1, 1, 2, 2), offsets(1, 1, 2, 2, value=-3), 2)
    out = F.max_unpool2d(planes(1, 1, 2, 2) + 1.0, offsets(1, 1, 2, 2, value=5), 2)
    assert out.numpy().ravel().tolist() == [0.0] * 5 + [1.0] + [0.0] * 10


@pytest.mark.parametrize("pool", ["max", "avg"])
def test_1d_ceil_mode_takes_the_partial_window_of_an_input_shorter_than_the_kernel(pool):
    # L = 3, kernel 4, stride 2: no full window, one partial one with ceil_mode (PyTorch's rule,
    # and max_pool2d's over a height of 1).
    x = kiln.tensor([[[1.0, 5.0, 3.0]]])
    fn = F.max_pool1d if pool == "max" else F.avg_pool1d
    want = [[[5.0]]] if pool == "max" else [[[3.0]]]  # the average of the window's 3 elements
    assert fn(x, 4, 2, ceil_mode=True).tolist() == want
    with raises(kiln.ShapeError, match="holds no window of the dilated kernel size"):
        fn(x, 4, 2, ceil_mode=False)


def test_adaptive_avg_pool_keeps_an_inf_to_the_windows_that_hold_it():
    # Windows [0, 2), [1, 4), [3, 5) over 5 columns (out 3), of lengths 2, 3, 2: the shorter
    # ones repeat their last element as the extra tap, which must not read outside the window
    # (a weight of 0 on an inf would be NaN).
    for at, holding in ((4, [2]), (0, [0]), (2, [1])):
        x = np.zeros((1, 1, 1, 5), np.float32)
        x[..., at] = np.inf
        got = F.adaptive_avg_pool2d(kiln.tensor(x), (1, 3)).numpy().ravel()
        assert [i for i in range(3) if np.isposinf(got[i])] == holding, (at, got)
        assert not np.isnan(got).any()
    ramp = np.arange(5, dtype=np.float32).reshape(1, 1, 1, 5)
    np.testing.assert_allclose(F.adaptive_avg_pool2d(kiln.tensor(ramp), (1, 3)).numpy().ravel(),
                               [0.5, 2.0, 3.5], rtol=1e-6)
