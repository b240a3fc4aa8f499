"""The torch.nn layers and functions ported in kiln/nn/_layers_more.py, padding.py, dropout.py,
pooling.py and functional.py: the 3-d and circular padding cells, Dropout3d, AlphaDropout and
FeatureAlphaDropout, ChannelShuffle, LPPool1d / 2d / 3d, LocalResponseNorm, CrossMapLRN2d,
FractionalMaxPool2d / 3d, MaxUnpool3d, and F's max_pool*_with_indices, instance_norm, pdist,
gumbel_softmax and upsample spellings. Each is checked against NumPy or a closed form (so the
file runs without PyTorch), then against PyTorch where it is installed (the ``torch`` fixture):
values, gradients, reprs and, for the fractional poolings, the windows drawn from the same
``_random_samples``; then under kiln.jit, and its errors."""

import math
import warnings

import numpy as np
import pytest

import kiln
from conftest import check_padding_cell, check_torch, close, raises, t
from kiln.nn import _layers_more as L
from kiln.nn import dropout as D
from kiln.nn import functional as F
from kiln.nn import padding as P
from kiln.nn import pooling as PL

mint = kiln.mint


def torch_grad(torch, out, x, upstream):
    (grad,) = torch.autograd.grad(out, x, torch.tensor(upstream))
    return grad


def check_against_torch(torch, ours, theirs, v, rng, atol_scale=False):
    """``ours`` (a kiln function or cell) against ``theirs`` (its PyTorch twin) on the float64
    array ``v``: the value, and the input's gradient for a random upstream gradient."""
    x, tx = t(v).requires_grad_(), torch.tensor(v, requires_grad=True)
    out, want = ours(x), theirs(tx)
    check_torch(out, want, kiln.float64, "value")
    upstream = rng.uniform(0.5, 2, size=tuple(want.shape))
    (grad,) = kiln.autograd.grad(out, [x], t(upstream))
    check_torch(grad, torch_grad(torch, want, tx, upstream), kiln.float64, "gradient",
                scale_atol=atol_scale)


# ------------------------------------------------------------------------------------------------
# Padding


PADS = [  # (kiln cell, NumPy np.pad arguments of the last dimensions, input shape)
    (P.ZeroPad3d((1, 0, 2, 1, 0, 2)), dict(pad=[(0, 2), (2, 1), (1, 0)], mode="constant"),
     (2, 2, 3, 4)),
    (P.ConstantPad3d(1, -2.5), dict(pad=[(1, 1)] * 3, mode="constant", constant_values=-2.5),
     (1, 2, 2, 3, 2)),
    (P.ReflectionPad3d((2, 1, 1, 0, 1, 1)), dict(pad=[(1, 1), (1, 0), (2, 1)], mode="reflect"),
     (2, 3, 4, 5)),
    (P.ReplicationPad3d((0, 3, 1, 1, 2, 0)), dict(pad=[(2, 0), (1, 1), (0, 3)], mode="edge"),
     (1, 2, 2, 3, 2)),
    (P.CircularPad1d((2, 3)), dict(pad=[(2, 3)], mode="wrap"), (2, 3, 4)),
    (P.CircularPad1d(1), dict(pad=[(1, 1)], mode="wrap"), (3, 2)),
    (P.CircularPad2d((1, 2, 3, 0)), dict(pad=[(3, 0), (1, 2)], mode="wrap"), (2, 3, 4)),
    (P.CircularPad3d((1, 1, 0, 2, 2, 1)), dict(pad=[(2, 1), (0, 2), (1, 1)], mode="wrap"),
     (1, 2, 3, 3, 4)),
]


@pytest.mark.parametrize("cell, spec, shape", PADS,
                         ids=[f"{type(c).__name__}-{len(s)}d" for c, _, s in PADS])
def test_padding_cells_match_numpy_pad(cell, spec, shape, rng):
    check_padding_cell(cell, spec, shape, rng)


def test_padding_cells_reprs_and_errors():
    assert repr(P.ZeroPad3d(1)) == "ZeroPad3d((1, 1, 1, 1, 1, 1))"
    assert repr(P.ConstantPad3d((1, 2, 3, 4, 5, 6), 0.5)) == \
        "ConstantPad3d(padding=(1, 2, 3, 4, 5, 6), value=0.5)"
    assert repr(P.CircularPad2d((1, 2, 3, 4))) == "CircularPad2d((1, 2, 3, 4))"
    assert repr(P.ReflectionPad3d(2)) == "ReflectionPad3d((2, 2, 2, 2, 2, 2))"
    assert isinstance(P.ZeroPad3d(1), P.ConstantPad3d)
    with pytest.raises(kiln.KilnValueError, match=r"ReplicationPad3d: expected padding to be an "
                                                  r"int or a sequence of 6 ints, got 4 values"):
        P.ReplicationPad3d((1, 2, 3, 4))
    with raises(kiln.ShapeError, match=r"CircularPad1d: expected an input \[C, W\] or "
                                       r"\[N, C, W\], got \[1, 2, 3, 4\] \(4-D\)"):
        P.CircularPad1d(1)(mint.zeros(1, 2, 3, 4))
    with raises(kiln.ShapeError, match=r"ReflectionPad3d: expected an input \[C, D, H, W\] or "
                                       r"\[N, C, D, H, W\], got \[3, 4, 5\] \(3-D\)"):
        P.ReflectionPad3d(1)(mint.zeros(3, 4, 5))
    with raises(kiln.KilnValueError, match="circular padding must be at most the dimension"):
        P.CircularPad1d(4)(mint.zeros(2, 3))


@pytest.mark.parametrize("name, padding", [
    ("ZeroPad3d", (1, 0, 2, 1, 0, 2)), ("ReflectionPad3d", (2, 1, 1, 0, 1, 1)),
    ("ReplicationPad3d", 2), ("CircularPad3d", (1, 2, 0, 1, 2, 1)), ("CircularPad2d", (2, 1, 0, 3)),
])
def test_padding_cells_match_torch(torch, name, padding, rng):
    ours, theirs = getattr(P, name)(padding), getattr(torch.nn, name)(padding)
    shape = (2, 3, 4, 5) if name.endswith("2d") else (2, 3, 3, 4, 5)
    for v in (rng.standard_normal(shape), rng.standard_normal(shape[1:])):  # and unbatched
        check_against_torch(torch, ours, theirs, v, rng)
    assert repr(ours) == repr(theirs)


# ------------------------------------------------------------------------------------------------
# Dropout3d, AlphaDropout, FeatureAlphaDropout


def test_dropout3d_drops_whole_channels(rng):
    x = mint.ones(6, 16, 2, 2, 3).requires_grad_()
    kiln.manual_seed(4)
    y = D.Dropout3d(0.25)(x)
    values = y.detach().numpy().reshape(6, 16, -1)
    assert np.all(values == values[..., :1])  # one draw per (sample, channel)
    assert set(np.unique(values).tolist()) == {0.0, float(np.float32(1 / 0.75))}
    (grad,) = kiln.autograd.grad(y.sum(), [x])
    np.testing.assert_array_equal(grad.numpy(), y.detach().numpy())
    one = F.dropout3d(mint.ones(8, 2, 3, 3), 0.5)  # one sample [C, D, H, W]
    planes = one.numpy().reshape(8, -1)
    assert np.all(planes == planes[:, :1])
    drop = D.Dropout3d()
    drop.eval()
    assert drop(x).is_same(x)
    assert repr(D.Dropout3d(0.1, True)) == "Dropout3d(p=0.1, inplace=True)"


# PyTorch's constants: alpha' = SELU's scale * alpha, and the affine map's a for p.
ALPHA_PRIME = 1.7580993408473766


def affine_a(p):
    return 1.0 / math.sqrt((ALPHA_PRIME ** 2 * p + 1) * (1 - p))


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_alpha_dropout_keeps_zero_mean_and_unit_variance(p, rng):
    v = rng.standard_normal((300, 1000)).astype(np.float32)
    x = t(v).requires_grad_()
    kiln.manual_seed(11)
    y = F.alpha_dropout(x, p, training=True)
    out = y.detach().numpy()
    assert abs(out.mean()) < 0.01 and abs(out.var() - 1) < 0.02
    # Each element is a * x + alpha' a p (kept) or -alpha' a (1 - p) (dropped).
    a = affine_a(p)
    kept = np.isclose(out, a * v + ALPHA_PRIME * a * p, rtol=1e-5, atol=1e-5)
    dropped = np.isclose(out, -ALPHA_PRIME * a * (1 - p), rtol=1e-5, atol=1e-6)
    assert np.all(kept | dropped)
    assert abs(dropped.mean() - p) < 0.01
    (grad,) = kiln.autograd.grad(y.sum(), [x])  # the gradient is the scaled keep mask
    np.testing.assert_allclose(grad.numpy(), np.where(kept & ~dropped, a, 0.0), rtol=1e-6)


def test_feature_alpha_dropout_draws_per_channel(rng):
    v = rng.standard_normal((40, 50, 4, 5))
    kiln.manual_seed(2)
    out = D.FeatureAlphaDropout(0.3)(t(v)).numpy()
    a = affine_a(0.3)
    dropped = np.all(np.isclose(out, -ALPHA_PRIME * a * 0.7), axis=(2, 3))
    kept = np.all(np.isclose(out, a * v + ALPHA_PRIME * a * 0.3), axis=(2, 3))
    assert np.all(dropped ^ kept)  # each slice [n, c] dropped or kept whole
    assert abs(dropped.mean() - 0.3) < 0.05
    assert abs(out.mean()) < 0.05 and abs(out.var() - 1) < 0.05


def test_alpha_dropouts_outside_training_and_at_the_ends():
    x = mint.ones(4, 5)
    assert F.alpha_dropout(x, 0.5).is_same(x)  # training=False by default, as PyTorch's
    assert F.feature_alpha_dropout(x, 0.5).is_same(x)
    assert F.alpha_dropout(x, 0.0, True).is_same(x)
    np.testing.assert_array_equal(F.alpha_dropout(x, 1.0, True).numpy(), 0.0)  # input * 0
    cell = D.AlphaDropout(0.2)
    cell.eval()
    assert cell(x).is_same(x)
    assert repr(D.AlphaDropout()) == "AlphaDropout(p=0.5)"
    assert repr(D.FeatureAlphaDropout(0.2, True)) == "FeatureAlphaDropout(p=0.2, inplace=True)"


def test_alpha_dropout_inplace_writes_its_input():
    x = mint.ones(64, 64)
    kiln.manual_seed(5)
    assert D.AlphaDropout(0.5, inplace=True)(x).is_same(x)
    assert len(np.unique(x.numpy())) == 2


def test_alpha_dropout_draws_a_new_mask_at_each_jitted_call():
    drop = D.AlphaDropout(0.5)
    step = kiln.jit(lambda x: drop(x))
    x = mint.ones(16, 16)
    kiln.manual_seed(9)
    jitted = [step(x).numpy() for _ in range(2)]
    kiln.manual_seed(9)
    eager = [drop(x).numpy() for _ in range(2)]
    assert not np.array_equal(jitted[0], jitted[1])
    for a, b in zip(jitted, eager):
        np.testing.assert_allclose(a, b, rtol=1e-6)


# ------------------------------------------------------------------------------------------------
# ChannelShuffle


def test_channel_shuffle_matches_numpy(rng):
    v = rng.standard_normal((2, 6, 3, 2))
    want = v.reshape(2, 3, 2, 3, 2).transpose(0, 2, 1, 3, 4).reshape(v.shape)
    close(F.channel_shuffle(t(v), 3), want, rtol=0, atol=0)
    close(L.ChannelShuffle(3)(t(v)), want, rtol=0, atol=0)
    close(F.native_channel_shuffle(t(v[:, :, 0]), 2),
          v[:, :, 0].reshape(2, 2, 3, 2).transpose(0, 2, 1, 3).reshape(2, 6, 2), rtol=0, atol=0)
    assert repr(L.ChannelShuffle(2)) == "ChannelShuffle(groups=2)"


def test_channel_shuffle_matches_torch(torch, rng):
    check_against_torch(torch, L.ChannelShuffle(2), torch.nn.ChannelShuffle(2),
                        rng.standard_normal((2, 4, 3)), rng)


# ------------------------------------------------------------------------------------------------
# LPPool


def windows(v, kernel, stride):
    """[..., out_1, ..., out_k, kernel_1 * ... * kernel_k]: the (unpadded, floor) windows of the
    last k = len(kernel) dimensions of v."""
    k = len(kernel)
    views = np.lib.stride_tricks.sliding_window_view(v, kernel, axis=tuple(range(-k, 0)))
    views = views[(Ellipsis,) + tuple(slice(None, None, s) for s in stride) + (slice(None),) * k]
    return views.reshape(views.shape[:-k] + (-1,))


@pytest.mark.parametrize("pool, kernel, stride, shape", [
    (F.lp_pool1d, (3,), (2,), (2, 3, 9)), (F.lp_pool2d, (2, 3), (1, 2), (2, 3, 5, 7)),
    (F.lp_pool2d, (2, 2), (2, 2), (3, 4, 6)), (F.lp_pool3d, (2, 2, 3), (1, 2, 2), (1, 2, 4, 5, 7)),
])
@pytest.mark.parametrize("p", [1, 2, 3.5, math.inf])
def test_lp_pool_matches_numpy(pool, kernel, stride, shape, p, rng):
    v = rng.uniform(0.1, 2, size=shape)
    got = pool(t(v), p, kernel, stride)
    w = windows(v, kernel, stride)
    want = w.max(-1) if p == math.inf else (w ** p).sum(-1) ** (1 / p)
    close(got, want, rtol=1e-12, atol=1e-12)


def test_lp_pool_cells_and_reprs(rng):
    v = rng.uniform(0.1, 2, size=(2, 3, 6, 6))
    close(PL.LPPool2d(2, 3)(t(v)), np.sqrt((windows(v, (3, 3), (3, 3)) ** 2).sum(-1)))
    assert repr(PL.LPPool2d(2, 3)) == \
        "LPPool2d(norm_type=2, kernel_size=3, stride=None, ceil_mode=False)"
    assert repr(PL.LPPool1d(1.5, 3, 2, True)) == \
        "LPPool1d(norm_type=1.5, kernel_size=3, stride=2, ceil_mode=True)"
    assert repr(PL.LPPool3d(2, (1, 2, 3))) == \
        "LPPool3d(norm_type=2, kernel_size=(1, 2, 3), stride=None, ceil_mode=False)"


def test_lp_pool_passes_no_nan_gradient_from_a_zero_window():
    x = mint.zeros(1, 1, 4, 4).requires_grad_()
    (grad,) = kiln.autograd.grad(F.lp_pool2d(x, 2, 2).sum(), [x])
    np.testing.assert_array_equal(grad.numpy(), 0.0)


@pytest.mark.parametrize("p", [2, 3, 1.5, math.inf, -math.inf])
@pytest.mark.parametrize("ceil_mode", [False, True])
def test_lp_pool_matches_torch(torch, p, ceil_mode, rng):
    v = rng.standard_normal((2, 3, 7, 8))
    v[:, :, :2, :2] = 0  # a window of zeros: value 0, gradient 0
    if p == 1.5:
        v = np.abs(v)
    check_against_torch(torch, lambda x: F.lp_pool2d(x, p, (3, 2), 2, ceil_mode),
                        lambda x: torch.nn.functional.lp_pool2d(x, p, (3, 2), 2, ceil_mode), v,
                        rng)
    check_against_torch(torch, PL.LPPool3d(p, 2, 1, ceil_mode),
                        torch.nn.LPPool3d(p, 2, 1, ceil_mode), v[:, :, :4], rng)


# ------------------------------------------------------------------------------------------------
# LocalResponseNorm, CrossMapLRN2d


def lrn_reference(v, size, alpha, beta, k):
    squares = np.pad(v ** 2, [(0, 0), (size // 2, (size - 1) // 2)] + [(0, 0)] * (v.ndim - 2))
    channels = v.shape[1]
    means = np.stack([squares[:, c:c + size].sum(1) for c in range(channels)], 1) / size
    return v / (k + alpha * means) ** beta


def cross_map_reference(v, size, alpha, beta, k):
    """PyTorch's CrossMapLRN2d values: channel 0's square stays in the running sum of every
    channel from (size - 1) // 2 + 1 on (Note [CrossMapLRN2d's windows])."""
    squares, reach = v ** 2, (size - 1) // 2
    sums = []
    for c in range(v.shape[1]):
        low, high = max(0, c - reach), min(v.shape[1] - 1, c + reach)
        sums.append(squares[:, low:high + 1].sum(1) + (squares[:, 0] if low > 0 else 0))
    return v * (k + alpha / size * np.stack(sums, 1)) ** -beta


@pytest.mark.parametrize("size", [1, 2, 3, 5])
@pytest.mark.parametrize("shape", [(2, 6, 5), (2, 6, 3, 4), (1, 4, 2, 3, 2)])
def test_local_response_norm_matches_numpy(size, shape, rng):
    v = rng.standard_normal(shape)
    close(F.local_response_norm(t(v), size, 0.5, 0.75, 1.3), lrn_reference(v, size, 0.5, 0.75,
                                                                           1.3), rtol=1e-12)
    close(L.LocalResponseNorm(size)(t(v)), lrn_reference(v, size, 1e-4, 0.75, 1.0), rtol=1e-12)


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5])
def test_cross_map_lrn2d_matches_numpy(size, rng):
    v = rng.standard_normal((2, 7, 3, 2))
    close(L.CrossMapLRN2d(size, 0.5, 0.75, 1.3)(t(v)),
          cross_map_reference(v, size, 0.5, 0.75, 1.3), rtol=1e-12)


def test_lrn_reprs_and_16_bit_floats(rng):
    assert repr(L.LocalResponseNorm(3)) == "LocalResponseNorm(3, alpha=0.0001, beta=0.75, k=1.0)"
    assert repr(L.CrossMapLRN2d(3)) == "CrossMapLRN2d(3, alpha=0.0001, beta=0.75, k=1)"
    v = rng.standard_normal((2, 4, 3, 3)).astype(np.float32)
    half = F.local_response_norm(t(v, kiln.float16), 3, 0.5)
    assert half.dtype == kiln.float16
    close(half, lrn_reference(v.astype(np.float16).astype(np.float64), 3, 0.5, 0.75, 1.0),
          rtol=2e-3, atol=1e-3)
    empty = mint.zeros(0, 3, 4)
    assert F.local_response_norm(empty, 2).is_same(empty)


@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_local_response_norm_matches_torch(torch, size, rng):
    for shape in ((2, 5, 6), (2, 5, 3, 4), (1, 5, 2, 3, 2)):
        check_against_torch(torch, L.LocalResponseNorm(size, 0.5, 0.75, 1.3),
                            torch.nn.LocalResponseNorm(size, 0.5, 0.75, 1.3),
                            rng.standard_normal(shape), rng)


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5])
def test_cross_map_lrn2d_values_match_torch_and_its_gradient_is_the_forwards(torch, size, rng):
    v = rng.standard_normal((2, 7, 3, 2))
    x = t(v).requires_grad_()
    out = L.CrossMapLRN2d(size, 0.5, 0.75, 1.3)(x)
    check_torch(out, torch.nn.CrossMapLRN2d(size, 0.5, 0.75, 1.3)(torch.tensor(v)),
                kiln.float64, "value")
    # PyTorch's hand-written backward is not its forward's gradient: compare with autograd of
    # the forward written out in torch ops.
    tx = torch.tensor(v, requires_grad=True)
    squares, reach = tx * tx, (size - 1) // 2
    sums = []
    for c in range(7):
        low, high = max(0, c - reach), min(6, c + reach)
        sums.append(squares[:, low:high + 1].sum(1) + (squares[:, 0] if low > 0 else 0))
    want = tx * (1.3 + 0.5 / size * torch.stack(sums, 1)) ** -0.75
    upstream = rng.uniform(0.5, 2, size=v.shape)
    (grad,) = kiln.autograd.grad(out, [x], t(upstream))
    check_torch(grad, torch_grad(torch, want, tx, upstream), kiln.float64, "gradient")


# ------------------------------------------------------------------------------------------------
# Fractional max pooling


def fractional_starts(u, size, out, kernel):
    """PyTorch's generate_intervals, in u's (NumPy) dtype."""
    dtype = u.dtype.type
    if out == 0:
        return []
    alpha = dtype(size - kernel) / dtype(out - 1) if out > 1 else dtype(0)
    starts = [int(dtype(dtype(i) + u) * alpha) - int(u * alpha) for i in range(out - 1)]
    return starts + [size - kernel]


def fractional_reference(v, kernel, out, samples):
    """Values and indices of fractional max pooling of v [N, C, *sizes] (no NaN) by PyTorch's
    rule: each window's first maximum in row-major order, its offset in the plane or volume."""
    spatial = len(kernel)
    order = (1, 0) if spatial == 2 else (0, 1, 2)  # the samples' dimension order
    n, c, *sizes = v.shape
    values = np.zeros((n, c) + tuple(out))
    indices = np.zeros((n, c) + tuple(out), np.int64)
    for b in range(n):
        for ch in range(c):
            starts = [fractional_starts(samples[b, ch, order[d]], sizes[d], out[d], kernel[d])
                      for d in range(spatial)]
            for o in np.ndindex(*out):
                box = tuple(slice(starts[d][o[d]], starts[d][o[d]] + kernel[d])
                            for d in range(spatial))
                window = v[(b, ch) + box]
                at = np.unravel_index(np.argmax(window), window.shape)
                where = tuple(starts[d][o[d]] + at[d] for d in range(spatial))
                values[(b, ch) + o] = window[at]
                indices[(b, ch) + o] = np.ravel_multi_index(where, sizes)
    return values, indices


@pytest.mark.parametrize("shape, kernel, out", [
    ((2, 3, 11, 13), (2, 2), (5, 6)), ((1, 2, 9, 10), (3, 2), (7, 9)),
    ((2, 2, 6, 7), (2, 3), (1, 1)), ((1, 2, 7, 8, 9), (2, 2, 3), (4, 6, 5)),
])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fractional_max_pool_matches_numpy(shape, kernel, out, dtype, rng):
    v = rng.standard_normal(shape).astype(dtype)
    samples = rng.random(shape[:2] + (len(kernel),)).astype(dtype)
    pool = F.fractional_max_pool2d if len(kernel) == 2 else F.fractional_max_pool3d
    values, indices = pool(t(v), kernel, out, return_indices=True, _random_samples=t(samples))
    want_values, want_indices = fractional_reference(v, kernel, out, samples)
    close(values, want_values, rtol=0, atol=0)
    np.testing.assert_array_equal(indices.numpy(), want_indices)


def test_fractional_max_pool_ratio_unbatched_and_empty_output(rng):
    v = rng.standard_normal((3, 11, 13))
    samples = rng.random((1, 3, 2))
    got = F.fractional_max_pool2d(t(v), 2, output_ratio=(0.5, 0.7), _random_samples=t(samples))
    close(got, fractional_reference(v[None], (2, 2), (5, 9), samples)[0][0], rtol=0, atol=0)
    values, indices = F.fractional_max_pool2d_with_indices(t(v), 2, (0, 4))
    assert tuple(values.shape) == (3, 0, 4) and indices.dtype == kiln.int64


def test_fractional_max_pool_gradient_goes_to_each_maximum(rng):
    v = rng.standard_normal((2, 2, 9, 9))
    samples = rng.random((2, 2, 2))
    x = t(v).requires_grad_()
    values, indices = F.fractional_max_pool2d(x, 3, 4, return_indices=True,
                                              _random_samples=t(samples))
    upstream = rng.standard_normal(tuple(values.shape))
    (grad,) = kiln.autograd.grad(values, [x], t(upstream))
    want = np.zeros((2, 2, 81))
    for b, c in np.ndindex(2, 2):  # overlapping windows add up at a shared maximum
        np.add.at(want[b, c], indices.numpy()[b, c].ravel(), upstream[b, c].ravel())
    close(grad, want.reshape(v.shape), rtol=1e-12, atol=1e-12)


def test_fractional_max_pool_cells(rng):
    samples = t(rng.random((2, 3, 2)))
    cell = L.FractionalMaxPool2d(2, output_size=3, return_indices=True, _random_samples=samples)
    assert repr(cell) == "FractionalMaxPool2d()"  # as PyTorch's
    assert list(cell.state_dict()) == ["_random_samples"]
    assert list(L.FractionalMaxPool2d(2, output_size=3).state_dict()) == []
    assert cell.kernel_size == (2, 2) and cell.output_size == (3, 3)
    ratio = L.FractionalMaxPool3d(2, output_ratio=0.5)
    assert ratio.output_ratio == (0.5, 0.5, 0.5) and ratio.output_size is None
    v = rng.standard_normal((2, 3, 8, 8))
    values, indices = cell(t(v))
    want = fractional_reference(v, (2, 2), (3, 3), samples.numpy())
    close(values, want[0], rtol=0, atol=0)
    np.testing.assert_array_equal(indices.numpy(), want[1])
    # Without samples each call draws its own, repeated by kiln.manual_seed.
    volume = t(rng.standard_normal((2, 3, 6, 7, 6)))
    kiln.manual_seed(5)
    first = ratio(volume)
    assert tuple(first.shape) == (2, 3, 3, 3, 3)
    kiln.manual_seed(5)
    np.testing.assert_array_equal(first.numpy(), ratio(volume).numpy())


def test_fractional_max_pool_under_jit(rng):
    samples = t(rng.random((2, 3, 3)))
    x = t(rng.standard_normal((2, 3, 6, 7, 8)))
    pool = kiln.jit(lambda v: F.fractional_max_pool3d_with_indices(v, 2, (3, 4, 5),
                                                                   _random_samples=samples))
    for got, want in zip(pool(x), F.fractional_max_pool3d(x, 2, (3, 4, 5), None, True,
                                                          samples)):
        np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape, kernel, out", [
    ((2, 3, 11, 13), (2, 2), (5, 6)), ((2, 3, 37, 41), (3, 2), (17, 29)),
    ((2, 2, 7, 8, 9), (2, 2, 3), (4, 6, 5)),
])
def test_fractional_max_pool_matches_torch(torch, dtype, shape, kernel, out, rng):
    v = rng.standard_normal(shape).astype(dtype)
    samples = rng.random(shape[:2] + (len(kernel),)).astype(dtype)
    name = "fractional_max_pool2d" if len(kernel) == 2 else "fractional_max_pool3d"
    x = t(v).requires_grad_()
    tx = torch.tensor(v, requires_grad=True)
    values, indices = getattr(F, name)(x, kernel, out, return_indices=True,
                                       _random_samples=t(samples))
    want, want_indices = getattr(torch.nn.functional, name)(
        tx, kernel, out, return_indices=True, _random_samples=torch.tensor(samples))
    np.testing.assert_array_equal(indices.numpy(), want_indices.numpy())
    np.testing.assert_array_equal(values.detach().numpy(), want.detach().numpy())
    upstream = rng.uniform(0.5, 2, size=tuple(want.shape)).astype(dtype)
    (grad,) = kiln.autograd.grad(values, [x], t(upstream))
    np.testing.assert_allclose(grad.numpy(), torch_grad(torch, want, tx, upstream).numpy(),
                               rtol=1e-6)


def test_fractional_max_pool_cells_match_torch(torch, rng):
    samples = rng.random((2, 3, 2))
    ours = L.FractionalMaxPool2d((2, 3), output_ratio=(0.5, 0.6), _random_samples=t(samples))
    theirs = torch.nn.FractionalMaxPool2d((2, 3), output_ratio=(0.5, 0.6),
                                          _random_samples=torch.tensor(samples))
    check_against_torch(torch, ours, theirs, rng.standard_normal((2, 3, 9, 11)), rng)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())


# ------------------------------------------------------------------------------------------------
# MaxUnpool3d and the _with_indices spellings


def test_max_unpool3d_puts_each_maximum_back(rng):
    v = rng.standard_normal((2, 3, 4, 6, 6))
    values, indices = F.max_pool3d_with_indices(t(v), 2)
    np.testing.assert_array_equal(indices.numpy(), F.max_pool3d(t(v), 2, return_indices=True)[1]
                                  .numpy())
    up = PL.MaxUnpool3d(2)(values, indices)
    want = np.zeros((2, 3, 4 * 6 * 6))
    for b, c in np.ndindex(2, 3):
        want[b, c, indices.numpy()[b, c].ravel()] = values.numpy()[b, c].ravel()
    close(up, want.reshape(v.shape), rtol=0, atol=0)
    bigger = F.max_unpool3d(values[0], indices[0], 2, output_size=(5, 7, 7))  # one sample
    assert tuple(bigger.shape) == (3, 5, 7, 7)
    assert repr(PL.MaxUnpool3d(2)) == \
        "MaxUnpool3d(kernel_size=(2, 2, 2), stride=(2, 2, 2), padding=(0, 0, 0))"
    with raises(kiln.KilnValueError, match=r"max_unpool3d: invalid output_size \(9, 6, 6\)"):
        F.max_unpool3d(values, indices, 2, output_size=(9, 6, 6))


@pytest.mark.parametrize("name, args, shape", [
    ("max_pool1d", (3, 2), (2, 3, 9)), ("max_pool2d", (2,), (2, 3, 5, 6)),
    ("max_pool3d", (2, 1), (3, 3, 4, 5)), ("adaptive_max_pool1d", (4,), (2, 3, 9)),
    ("adaptive_max_pool2d", ((3, 2),), (3, 5, 6)), ("adaptive_max_pool3d", (2,), (1, 2, 3, 4, 5)),
])
def test_with_indices_spellings_return_the_indices(name, args, shape, rng):
    x = t(rng.standard_normal(shape))
    values, indices = getattr(F, f"{name}_with_indices")(x, *args)
    want_values, want_indices = getattr(F, name)(x, *args, return_indices=True)
    np.testing.assert_array_equal(values.numpy(), want_values.numpy())
    np.testing.assert_array_equal(indices.numpy(), want_indices.numpy())


def test_max_unpool3d_matches_torch(torch, rng):
    v = rng.standard_normal((2, 3, 4, 6, 6))
    values, indices = torch.nn.functional.max_pool3d(torch.tensor(v), 2, return_indices=True)
    ours = PL.MaxUnpool3d(2)(t(values.numpy()), t(indices.numpy()), (5, 7, 7))
    check_torch(ours, torch.nn.MaxUnpool3d(2)(values, indices, (5, 7, 7)), kiln.float64, "value")


# ------------------------------------------------------------------------------------------------
# instance_norm, pdist, gumbel_softmax, upsample


def instance_reference(v, eps=1e-5):
    axes = tuple(range(2, v.ndim))
    mean, var = v.mean(axes, keepdims=True), v.var(axes, keepdims=True)
    return (v - mean) / np.sqrt(var + eps)


def test_instance_norm_matches_numpy(rng):
    v = rng.standard_normal((2, 3, 4, 5))
    weight, bias = rng.random(3), rng.random(3)
    running_mean, running_var = t(np.zeros(3)), t(np.ones(3))
    out = F.instance_norm(t(v), running_mean, running_var, t(weight), t(bias), momentum=0.25)
    want = instance_reference(v) * weight.reshape(3, 1, 1) + bias.reshape(3, 1, 1)
    close(out, want, rtol=1e-10, atol=1e-12)
    # The running statistics move towards the samples' mean per-channel mean and unbiased var.
    close(running_mean, 0.25 * v.mean((2, 3)).mean(0), rtol=1e-12, atol=1e-12)
    close(running_var, 0.75 + 0.25 * v.var((2, 3), ddof=1).mean(0), rtol=1e-12, atol=1e-12)
    frozen = F.instance_norm(t(v), running_mean, running_var, use_input_stats=False)
    close(frozen, (v - running_mean.numpy().reshape(3, 1, 1))
          / np.sqrt(running_var.numpy().reshape(3, 1, 1) + 1e-5), rtol=1e-10, atol=1e-12)
    close(F.instance_norm(t(v[:, :, 0])), instance_reference(v[:, :, 0]), rtol=1e-10)


def test_instance_norm_updates_the_running_statistics_under_jit(rng):
    v = t(rng.standard_normal((2, 3, 6)))
    eager_stats = [t(np.zeros(3)), t(np.ones(3))]
    jit_stats = [t(np.zeros(3)), t(np.ones(3))]
    step = kiln.jit(lambda x: F.instance_norm(x, *jit_stats))
    for _ in range(2):
        close(step(v), F.instance_norm(v, *eager_stats).numpy(), rtol=1e-12, atol=1e-12)
    for ours, theirs in zip(jit_stats, eager_stats):
        close(ours, theirs.numpy(), rtol=1e-12, atol=1e-12)


def test_instance_norm_matches_torch(torch, rng):
    v = rng.standard_normal((2, 3, 4, 5))
    weight, bias = rng.random(3), rng.random(3)
    for use_input_stats in (True, False):
        ours = [t(rng.random(3)), t(rng.random(3) + 0.5)]
        theirs = [torch.tensor(s.numpy()) for s in ours]
        check_against_torch(
            torch, lambda x: F.instance_norm(x, *ours, t(weight), t(bias), use_input_stats, 0.3),
            lambda x: torch.nn.functional.instance_norm(
                x, *theirs, torch.tensor(weight), torch.tensor(bias), use_input_stats, 0.3),
            v, rng)
        for a, b in zip(ours, theirs):
            check_torch(a, b, kiln.float64, "running statistic")


@pytest.mark.parametrize("p", [2, 1, 0, 3, math.inf, 0.5])
def test_pdist_matches_numpy(p, rng):
    v = rng.standard_normal((5, 4))
    v[3] = v[1]  # a zero distance
    pairs = [(i, j) for i in range(5) for j in range(i + 1, 5)]
    diffs = np.abs(np.stack([v[i] - v[j] for i, j in pairs]))
    want = {0: (diffs != 0).sum(-1), math.inf: diffs.max(-1)}.get(p)
    want = (diffs ** p).sum(-1) ** (1 / p) if want is None else want
    close(F.pdist(t(v), p), want, rtol=1e-12, atol=1e-12)
    assert tuple(F.pdist(mint.zeros(1, 3)).shape) == (0,)


@pytest.mark.parametrize("p", [2, 1, 3, math.inf])
def test_pdist_matches_torch(torch, p, rng):
    check_against_torch(torch, lambda x: F.pdist(x, p),
                        lambda x: torch.nn.functional.pdist(x, p), rng.standard_normal((6, 3)),
                        rng)


def test_gumbel_softmax_samples_the_softmax_and_hard_goes_straight_through(rng):
    logits = np.array([0.0, 1.0, 2.0, -1.0])
    kiln.manual_seed(3)
    hard = F.gumbel_softmax(t(np.tile(logits, (40000, 1))), hard=True).numpy()
    assert set(np.unique(hard).tolist()) == {0.0, 1.0} and np.all(hard.sum(-1) == 1)
    # The Gumbel-max trick: the one-hot's class is distributed as softmax(logits).
    np.testing.assert_allclose(hard.mean(0), np.exp(logits) / np.exp(logits).sum(), atol=0.01)
    x = t(rng.standard_normal((3, 5))).requires_grad_()
    upstream = t(rng.standard_normal((3, 5)))
    kiln.manual_seed(8)
    soft = F.gumbel_softmax(x, tau=0.5, dim=0)
    close(soft.detach().sum(0), np.ones(5))
    (soft_grad,) = kiln.autograd.grad(soft, [x], upstream)
    kiln.manual_seed(8)  # the same draws: hard's gradient is the soft sample's
    (hard_grad,) = kiln.autograd.grad(F.gumbel_softmax(x, tau=0.5, hard=True, dim=0), [x],
                                      upstream)
    close(hard_grad, soft_grad.numpy(), rtol=1e-12, atol=1e-12)
    with pytest.warns(UserWarning, match="`eps` parameter is deprecated") as caught:
        F.gumbel_softmax(x, eps=1e-5)
    assert caught[0].filename == __file__


def test_upsample_spellings_warn_and_interpolate(rng):
    x = t(rng.standard_normal((2, 3, 4, 5)))
    for call, want, name in [
        (lambda: F.upsample(x, scale_factor=2, mode="bilinear"),
         F.interpolate(x, scale_factor=2, mode="bilinear"), "upsample"),
        (lambda: F.upsample_nearest(x, size=(7, 9)), F.interpolate(x, size=(7, 9)),
         "upsample_nearest"),
        (lambda: F.upsample_bilinear(x, scale_factor=2),
         F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True),
         "upsample_bilinear"),
    ]:
        with pytest.warns(UserWarning, match=rf"`nn.functional.{name}` is deprecated. Use "
                                             rf"`nn.functional.interpolate` instead.") as caught:
            got = call()
        assert caught[0].filename == __file__
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_jitted_compositions_match_eager(rng):
    x = t(rng.uniform(0.1, 2, size=(2, 6, 4, 4)))

    def layers(v):
        return (F.lp_pool2d(v, 2, 2).sum() + F.channel_shuffle(v, 3).sum()
                + L.CrossMapLRN2d(3)(v).sum() + F.local_response_norm(v, 2).sum()
                + F.pdist(v.reshape(12, 16)).sum() + P.CircularPad3d(1)(v).sum())

    close(kiln.jit(layers)(x), layers(x).numpy(), rtol=1e-12)


# ------------------------------------------------------------------------------------------------
# Errors


@pytest.mark.parametrize("call, error, message", [
    (lambda: F.fractional_max_pool2d(mint.zeros(2, 3, 7, 9), 2), kiln.KilnValueError,
     "fractional_max_pool2d: expected an output_size or an output_ratio, got neither"),
    (lambda: F.fractional_max_pool2d(mint.zeros(2, 3, 7, 9), 2, 7), kiln.ShapeError,
     r"fractional_max_pool2d: expected output height \+ kernel height - 1 <= input height "
     r"\(7\), got output height 7 and kernel height 2"),
    (lambda: F.fractional_max_pool3d(mint.zeros(1, 1, 7, 8, 9), 2, (6, 2, 2)), kiln.ShapeError,
     r"fractional_max_pool3d: expected output depth \+ kernel depth - 1 < input depth \(7\)"),
    (lambda: F.fractional_max_pool2d(mint.zeros(2, 3, 7, 9), 2, 3,
                                     _random_samples=mint.zeros(2, 3, 2, dtype=kiln.float64)),
     kiln.DTypeError, "fractional_max_pool2d: expected _random_samples of the input's dtype "
                      "float32, got float64"),
    (lambda: F.fractional_max_pool2d(mint.zeros(2, 3, 7, 9), 2, 3,
                                     _random_samples=mint.zeros(1, 3, 2)), kiln.ShapeError,
     r"expected _random_samples \[N, C, 2\] with N at least the batch's 2 and C = 3, got "
     r"\[1, 3, 2\]"),
    (lambda: F.fractional_max_pool2d(mint.zeros(2, 0, 7, 9), 2, 3), kiln.ShapeError,
     "fractional_max_pool2d: expected input with non-zero sizes in every dimension"),
    (lambda: F.fractional_max_pool2d(mint.zeros(2, 3, 7, 9), 2, output_ratio=(0.5, 0.5, 0.5)),
     kiln.KilnValueError, "expected output_ratio to be a number or a sequence of 2, got 3"),
    (lambda: L.FractionalMaxPool2d(2, 3, 0.5), kiln.KilnValueError,
     "FractionalMaxPool2d: expected only one of output_size and output_ratio, got both"),
    (lambda: L.FractionalMaxPool3d(2, output_ratio=1.0), kiln.KilnValueError,
     r"FractionalMaxPool3d: expected output_ratio between 0 and 1 \(exclusive\), got 1.0"),
    (lambda: F.lp_pool2d(mint.zeros(2, 3, 4, 4), 0, 2), kiln.KilnValueError,
     "lp_pool2d: norm_type must be a non-zero value, got 0"),
    (lambda: PL.LPPool1d("2", 2), kiln.KilnTypeError,
     "LPPool1d: expected norm_type to be a real number, got str"),
    (lambda: F.lp_pool1d(mint.zeros((2, 3, 4), dtype=kiln.int32), 2, 2), kiln.DTypeError,
     "lp_pool1d: expected a floating-point input, got int32"),
    (lambda: F.local_response_norm(mint.zeros(2, 3), 2), kiln.ShapeError,
     r"local_response_norm: expected input \[N, C, ...\] of at least 3 dimensions, got "
     r"\[2, 3\]"),
    (lambda: L.LocalResponseNorm(0), kiln.KilnValueError,
     "LocalResponseNorm: size must be at least 1, got 0"),
    (lambda: L.CrossMapLRN2d(3)(mint.zeros(2, 3, 4)), kiln.ShapeError,
     r"CrossMapLRN2d: expected input \[N, C, H, W\], got \[2, 3, 4\] \(3-D\)"),
    (lambda: F.channel_shuffle(mint.zeros(2, 6, 2), 4), kiln.ShapeError,
     r"channel_shuffle: expected the channels \(dim 1\) of input \[2, 6, 2\] to be divisible "
     r"by groups = 4"),
    (lambda: F.channel_shuffle(mint.zeros(6, 2), 2), kiln.ShapeError,
     "channel_shuffle: expected input .* of at least 3 dimensions"),
    (lambda: L.ChannelShuffle(0), kiln.KilnValueError,
     "ChannelShuffle: groups must be at least 1, got 0"),
    (lambda: F.pdist(mint.zeros(2, 3, 4)), kiln.ShapeError,
     r"pdist: expected a 2-D input \[N, M\], got \[2, 3, 4\]"),
    (lambda: F.pdist(mint.zeros(4, 3), -1), kiln.KilnValueError,
     "pdist: expected a non-negative p, got -1.0"),
    (lambda: F.instance_norm(mint.zeros(2, 3, 1, 1)), kiln.KilnValueError,
     r"instance_norm: expected more than 1 spatial element when using the input's "
     r"statistics, got input \[2, 3, 1, 1\]"),
    (lambda: F.instance_norm(mint.zeros(2, 3, 4), use_input_stats=False), kiln.KilnValueError,
     "instance_norm: expected running_mean and running_var when use_input_stats=False"),
    (lambda: F.instance_norm(mint.zeros(2, 3, 5), mint.zeros(4), mint.ones(4)), kiln.ShapeError,
     r"instance_norm: expected running_mean of shape \[3\] \(one per channel\), got \[4\]"),
    (lambda: F.feature_alpha_dropout(mint.zeros(5), 0.5, True), kiln.ShapeError,
     r"feature_alpha_dropout: expected an input \[N, C, ...\] of at least 2 dimensions"),
    (lambda: D.AlphaDropout(1.5), kiln.KilnValueError,
     r"AlphaDropout: p must be in \[0, 1\], got 1.5"),
    (lambda: F.alpha_dropout(mint.zeros((5,), dtype=kiln.int32), 0.5, True), kiln.DTypeError,
     "alpha_dropout: expected a floating-point input, got int32"),
    (lambda: D.Dropout3d()(mint.zeros(2, 3, 4)), kiln.ShapeError,
     r"Dropout3d: expected a 4-D \[C, D, H, W\] or 5-D \[N, C, D, H, W\] input, got shape "
     r"\[2, 3, 4\]"),
    (lambda: F.gumbel_softmax(mint.zeros((3,), dtype=kiln.int64)), kiln.DTypeError,
     "gumbel_softmax: expected a floating-point logits, got int64"),
])
def test_errors(call, error, message):
    with raises(error, match=message):
        call()


def test_dropout1d_keeps_its_message():
    with raises(kiln.ShapeError, match=r"Dropout1d: expected a 2-D \[C, L\] or 3-D \[N, C, L\] "
                                       r"input, got shape \[2, 3, 4, 5\]"):
        D.Dropout1d()(mint.ones(2, 3, 4, 5))


def test_no_warning_from_the_cells(rng):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = t(rng.standard_normal((2, 4, 5, 6)))
        L.LocalResponseNorm(3)(x)
        PL.LPPool2d(2, 2)(x)
        L.FractionalMaxPool2d(2, output_ratio=0.5)(x)
