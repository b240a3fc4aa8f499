"""affine_grid and grid_sample (kiln/nn/_grid_sampling.py). Torch-free checks first: grid_sample
against a NumPy reference written from PyTorch's rules (GridSampler.h) in every mode, padding
mode and align_corners, its gradients (the input's by the adjoint identity, the grid's by
finite differences), affine_grid against its closed form, the identity transform, 16-bit
rounding, kiln.jit and the errors; then the values and gradients against PyTorch's through the
``torch`` fixture."""

import itertools
import math

import numpy as np
import pytest

import kiln
from conftest import check_torch, t, torch_twin
from kiln.nn.functional import affine_grid, grid_sample

MODES = ("bilinear", "nearest", "bicubic")
PADDINGS = ("zeros", "border", "reflection")
DEFAULT_ALIGN = "Default grid_sample and affine_grid behavior has changed to align_corners=False"
UNIT_SIZE = "Since version 1.3.0, affine_grid behavior has changed for unit-size grids"


# ------------------------------------------------------------------------------------------------
# NumPy reference: each output a sum over the taps of every spatial axis


def unnormalize(coord, size, align):
    return (coord + 1) / 2 * (size - 1) if align else ((coord + 1) * size - 1) / 2


def reflect(position, twice_low, twice_high):
    if twice_low == twice_high:
        return 0.0
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    distance = abs(position - low)
    extra = math.fmod(distance, span)
    return extra + low if math.floor(distance / span) % 2 == 0 else span - extra + low


def pad_position(position, size, padding, align):
    if padding == "reflection":
        position = reflect(position, 0, 2 * (size - 1)) if align else reflect(position, -1,
                                                                              2 * size - 1)
    if padding != "zeros":
        position = min(size - 1, max(position, 0))
    return position


def keys_cubic(v):
    v, a = abs(v), -0.75
    if v < 1:
        return ((a + 2) * v - (a + 3)) * v * v + 1
    return ((a * v - 5 * a) * v + 8 * a) * v - 4 * a if v < 2 else 0.0


def axis_taps(coord, size, mode, padding, align):
    """[(index or None when outside, weight)] of one axis for one normalized coordinate."""
    source = unnormalize(coord, size, align)
    if mode == "bicubic":
        low = math.floor(source)
        taps = [(int(pad_position(low + k, size, padding, align)), keys_cubic(source - low - k))
                for k in range(-1, 3)]
    else:
        source = pad_position(source, size, padding, align)
        if mode == "nearest":
            taps = [(round(source), 1.0)]  # Python's round: half to even, as nearbyint
        else:
            low = math.floor(source)
            taps = [(low, low + 1 - source), (low + 1, source - low)]
    return [(i if 0 <= i < size else None, w) for i, w in taps]


def reference(x, grid, mode, padding, align):
    """grid_sample of NumPy arrays x [N, C, *S] and grid [N, *O, d] in float64."""
    sizes = x.shape[2:]
    out = np.zeros(x.shape[:2] + grid.shape[1:-1])
    for n in range(x.shape[0]):
        for point in np.ndindex(*grid.shape[1:-1]):
            coords = grid[(n,) + point][::-1]  # (x, y[, z]) to the axes' order (D, H, W)
            per_axis = [axis_taps(c, s, mode, padding, align) for c, s in zip(coords, sizes)]
            for combo in itertools.product(*per_axis):
                if all(i is not None for i, _ in combo):
                    weight = math.prod(w for _, w in combo)
                    out[(n, slice(None)) + point] += weight * x[(n, slice(None))
                                                                + tuple(i for i, _ in combo)]
    return out


def operands(rng, rank, spread=1.6, batch=2, channels=2):
    """A random input and grid for ``rank`` spatial dimensions, the grid reaching past [-1, 1]."""
    sizes, points = ((4, 5), (3, 2)) if rank == 2 else ((3, 4, 3), (2, 2, 2))
    x = rng.standard_normal((batch, channels) + sizes)
    grid = rng.uniform(-spread, spread, (batch,) + points + (rank,))
    return x, grid


# ------------------------------------------------------------------------------------------------
# Values and gradients, torch-free


@pytest.mark.parametrize("rank", [2, 3])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("align", [False, True])
def test_values_match_the_reference(rank, mode, padding, align, rng):
    x, grid = operands(rng, rank)
    out = grid_sample(t(x), t(grid), mode=mode, padding_mode=padding, align_corners=align)
    np.testing.assert_allclose(out.numpy(), reference(x, grid, mode, padding, align),
                               rtol=1e-12, atol=1e-12)


def test_nearest_rounds_half_to_even():
    # Width 4 without align_corners: x = -0.5, 0, 0.5 are the source positions 0.5, 1.5, 2.5.
    x = np.arange(4.0).reshape(1, 1, 1, 4)
    grid = np.array([[[[-0.5, 0.0], [0.0, 0.0], [0.5, 0.0]]]])
    out = grid_sample(t(x), t(grid), mode="nearest", align_corners=False)
    np.testing.assert_array_equal(out.numpy().ravel(), [0.0, 2.0, 2.0])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("padding", PADDINGS)
def test_input_gradient_is_the_adjoint(mode, padding, rng):
    # The output is linear in the input: <gradient, v> = <upstream, sample(v)> for any v.
    x, grid = operands(rng, 2)
    probe = rng.standard_normal(x.shape)
    xs = t(x).requires_grad_()
    out = grid_sample(xs, t(grid), mode=mode, padding_mode=padding, align_corners=False)
    upstream = rng.standard_normal(out.shape)
    (grad,) = kiln.autograd.grad(out, [xs], t(upstream))
    expected = np.sum(upstream * reference(probe, grid, mode, padding, False))
    assert np.sum(grad.numpy() * probe) == pytest.approx(expected, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("rank", [2, 3])
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("padding", PADDINGS)
def test_grid_gradient_matches_finite_differences(rank, mode, padding, rng):
    x, grid = operands(rng, rank, spread=1.3)
    gs = t(grid).requires_grad_()
    out = grid_sample(t(x), gs, mode=mode, padding_mode=padding, align_corners=True)
    upstream = rng.standard_normal(out.shape)
    (grad,) = kiln.autograd.grad(out, [gs], t(upstream))
    step, numeric = 1e-6, np.zeros_like(grid)
    for at in np.ndindex(*grid.shape):
        moved = [grid.copy(), grid.copy()]
        moved[0][at] += step
        moved[1][at] -= step
        ahead, behind = (np.sum(upstream * reference(x, g, mode, padding, True)) for g in moved)
        numeric[at] = (ahead - behind) / (2 * step)
    np.testing.assert_allclose(grad.numpy(), numeric, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("padding", PADDINGS)
def test_nearest_grid_gradient_is_zero(padding, rng):
    x, grid = operands(rng, 2)
    gs = t(grid).requires_grad_()
    out = grid_sample(t(x), gs, mode="nearest", padding_mode=padding, align_corners=False)
    (grad,) = kiln.autograd.grad(out.sum(), [gs])
    np.testing.assert_array_equal(grad.numpy(), np.zeros_like(grid))


def test_clipped_axis_has_zero_grid_gradient():
    # "border" clamps x = 3 to the right border: that coordinate's gradient is 0, y's is not.
    x = np.arange(12.0).reshape(1, 1, 3, 4)
    gs = t(np.array([[[[3.0, 0.2]]]])).requires_grad_()
    out = grid_sample(t(x), gs, padding_mode="border", align_corners=True)
    (grad,) = kiln.autograd.grad(out.sum(), [gs])
    np.testing.assert_allclose(grad.numpy().ravel(), [0.0, 4.0], atol=1e-12)  # dy: 4 * (3 - 1) / 2


def test_empty_output_and_batch():
    x = t(np.ones((2, 3, 4, 5)))
    assert grid_sample(x, t(np.zeros((2, 0, 3, 2))), align_corners=False).shape == (2, 3, 0, 3)
    empty = grid_sample(t(np.ones((0, 3, 4, 5))), t(np.zeros((0, 2, 2, 2))), align_corners=False)
    assert empty.shape == (0, 3, 2, 2)


@pytest.mark.parametrize("dtype", [kiln.float16, kiln.bfloat16])
def test_16_bit_is_computed_in_float32_and_rounded_once(dtype, rng):
    x, grid = operands(rng, 2)
    x16, grid16 = t(x, dtype), t(grid, dtype)
    out = grid_sample(x16, grid16, mode="bicubic", padding_mode="reflection", align_corners=False)
    wide = grid_sample(x16.to(kiln.float32), grid16.to(kiln.float32), mode="bicubic",
                       padding_mode="reflection", align_corners=False)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out.to(kiln.float32).numpy(), wide.to(dtype).to(
        kiln.float32).numpy())


# ------------------------------------------------------------------------------------------------
# affine_grid


def base_coordinates(steps, align):
    if steps == 1:
        return np.zeros(1)
    if align:
        return np.linspace(-1, 1, steps)
    return (2 * np.arange(steps) + 1) / steps - 1


@pytest.mark.filterwarnings(f"ignore:{UNIT_SIZE}")
@pytest.mark.parametrize("size", [(2, 3, 4, 5), (2, 1, 3, 4, 5), (1, 2, 1, 6)])
@pytest.mark.parametrize("align", [False, True])
def test_affine_grid_closed_form(size, align, rng):
    rank = len(size) - 2
    theta = rng.standard_normal((size[0], rank, rank + 1))
    ts = t(theta).requires_grad_()
    grid = affine_grid(ts, list(size), align_corners=align)
    # Point (.., h, w) is theta @ (x_w, y_h, [z_d,] 1), x along the last axis.
    mesh = np.meshgrid(*(base_coordinates(s, align) for s in size[2:]), indexing="ij")
    base = np.stack(list(mesh[::-1]) + [np.ones(size[2:])], -1)
    expected = np.einsum("...j,nij->n...i", base, theta)
    np.testing.assert_allclose(grid.numpy(), expected, rtol=1e-12, atol=1e-12)
    upstream = rng.standard_normal(expected.shape)
    (grad,) = kiln.autograd.grad(grid, [ts], t(upstream))
    flat = upstream.reshape(size[0], -1, rank), base.reshape(-1, rank + 1)
    np.testing.assert_allclose(grad.numpy(), np.einsum("npi,pj->nij", *flat), rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("rank", [2, 3])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("align", [False, True])
def test_identity_transform_reproduces_the_input(rank, mode, align, rng):
    shape = (2, 3, 4, 5) if rank == 2 else (2, 3, 3, 4, 5)
    x = rng.standard_normal(shape)
    theta = np.broadcast_to(np.eye(rank, rank + 1), (2, rank, rank + 1))
    grid = affine_grid(t(theta), list(shape), align_corners=align)
    out = grid_sample(t(x), grid, mode=mode, align_corners=align)
    np.testing.assert_allclose(out.numpy(), x, rtol=1e-12, atol=1e-12)


def test_affine_grid_keeps_16_bit_dtype():
    theta = t(np.eye(2, 3)[None], kiln.bfloat16)
    assert affine_grid(theta, (1, 1, 2, 3), align_corners=False).dtype == kiln.bfloat16


# ------------------------------------------------------------------------------------------------
# align_corners=None, kiln.jit


def test_align_corners_none_is_false_with_pytorchs_warning(rng):
    x, grid = operands(rng, 2)
    with pytest.warns(UserWarning, match=DEFAULT_ALIGN) as caught:
        out = grid_sample(t(x), t(grid))
    assert caught[0].filename == __file__  # pointed at the caller
    np.testing.assert_array_equal(out.numpy(), grid_sample(t(x), t(grid),
                                                           align_corners=False).numpy())
    theta = t(np.eye(2, 3)[None])
    with pytest.warns(UserWarning, match=DEFAULT_ALIGN):
        affine_grid(theta, (1, 1, 2, 3))
    with pytest.warns(UserWarning, match=UNIT_SIZE):
        affine_grid(theta, (1, 1, 1, 3), align_corners=True)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("rank", [2, 3])
def test_traces_under_jit(mode, rank, rng):
    x, grid = (t(a, kiln.float32) for a in operands(rng, rank))

    def sample(x, grid):
        return grid_sample(x, grid, mode=mode, padding_mode="reflection", align_corners=False)

    step = kiln.jit(sample)
    eager = sample(x, grid).numpy()
    for _ in range(2):
        np.testing.assert_array_equal(step(x, grid).numpy(), eager)
    assert step.cache_info().hits == 1


def test_spatial_transformer_traces_under_jit(rng):
    x = t(rng.standard_normal((2, 3, 4, 5)), kiln.float32)
    theta = t(rng.standard_normal((2, 2, 3)) * 0.3 + np.eye(2, 3), kiln.float32)

    def transform(x, theta):
        return grid_sample(x, affine_grid(theta, x.shape, align_corners=False),
                           align_corners=False)

    np.testing.assert_array_equal(kiln.jit(transform)(x, theta).numpy(),
                                  transform(x, theta).numpy())


# ------------------------------------------------------------------------------------------------
# Errors


def ones(*shape, dtype=kiln.float32):
    return kiln.mint.ones(shape, dtype=dtype)


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(mode="linear"), kiln.KilnValueError,
     "grid_sample: expected mode 'bilinear', 'nearest' or 'bicubic', got 'linear'"),
    (dict(padding_mode="constant"), kiln.KilnValueError,
     "grid_sample: expected padding_mode 'zeros', 'border' or 'reflection', got 'constant'"),
    (dict(align_corners=1), kiln.KilnTypeError,
     "grid_sample: align_corners must be a bool, got int 1"),
])
def test_grid_sample_argument_errors(kwargs, error, message):
    with pytest.raises(error, match=message):
        grid_sample(ones(1, 1, 2, 2), ones(1, 2, 2, 2), **{"align_corners": False, **kwargs})


@pytest.mark.parametrize("input_shape, grid_shape, message", [
    ((1, 1, 4), (1, 3, 2), r"expected input \[N, C, H_in, W_in\] with grid \[N, H, W, 2\], or "
                           r"input \[N, C, D_in, H_in, W_in\] with grid \[N, D, H, W, 3\], got "
                           r"input \[1, 1, 4\] and grid \[1, 3, 2\]"),
    ((1, 1, 4, 4), (1, 2, 2, 2, 3), r"got input \[1, 1, 4, 4\] and grid \[1, 2, 2, 2, 3\]"),
    ((2, 1, 4, 4), (1, 3, 3, 2), r"expected grid \[2, \.\.\., 2\] \(the input's batch size and "
                                 r"one coordinate per spatial dimension\) for input "
                                 r"\[2, 1, 4, 4\], got \[1, 3, 3, 2\]"),
    ((1, 1, 4, 4, 4), (1, 3, 3, 3, 2), r"expected grid \[1, \.\.\., 3\]"),
    ((1, 1, 0, 4), (1, 3, 3, 2), r"expected input with non-empty spatial dimensions, got "
                                 r"\[1, 1, 0, 4\]"),
])
def test_grid_sample_shape_errors(input_shape, grid_shape, message):
    with pytest.raises(kiln.ShapeError, match="grid_sample: .*" + message):
        grid_sample(ones(*input_shape), ones(*grid_shape), align_corners=False)


def test_grid_sample_dtype_errors():
    with pytest.raises(kiln.DTypeError, match="grid_sample: expected grid of the input's dtype "
                                              "float32, got float64"):
        grid_sample(ones(1, 1, 2, 2), ones(1, 2, 2, 2, dtype=kiln.float64), align_corners=False)
    with pytest.raises(kiln.DTypeError, match="grid_sample: expected a floating-point input, got "
                                              "int64"):
        grid_sample(ones(1, 1, 2, 2, dtype=kiln.int64), ones(1, 2, 2, 2), align_corners=False)
    with pytest.raises(kiln.KilnTypeError, match="grid_sample: expected grid to be a "
                                                 "kiln.Tensor, got list"):
        grid_sample(ones(1, 1, 2, 2), [[0.0, 0.0]], align_corners=False)


@pytest.mark.parametrize("theta_shape, size, error, message", [
    ((1, 2, 3), (1, 1, 4), kiln.ShapeError,
     r"expected size \[N, C, H, W\] \(a 2-d transform\) or \[N, C, D, H, W\] \(a 3-d one\), "
     r"got \[1, 1, 4\]"),
    ((1, 2, 3), (1, 1, 2, 2, 2), kiln.ShapeError,
     r"expected theta of shape \[N, 3, 4\] with N = 1 for size \[1, 1, 2, 2, 2\], got "
     r"\[1, 2, 3\]"),
    ((2, 2, 3), (1, 1, 2, 2), kiln.ShapeError, r"\[N, 2, 3\] with N = 1 .* got \[2, 2, 3\]"),
    ((1, 2, 3), (1, 1, 0, 2), kiln.KilnValueError,
     r"expected a size of positive numbers, got \[1, 1, 0, 2\]"),
    ((1, 2, 3), "1x1x2x2", kiln.KilnTypeError,
     "expected size to be a list or tuple of ints, got str '1x1x2x2'"),
    ((1, 2, 3), (1, 1, 2.0, 2), kiln.KilnTypeError, "list or tuple of ints"),
])
def test_affine_grid_errors(theta_shape, size, error, message):
    with pytest.raises(error, match="affine_grid: .*" + message):
        affine_grid(ones(*theta_shape), size, align_corners=False)


def test_affine_grid_wants_floating_theta():
    with pytest.raises(kiln.DTypeError, match="affine_grid: expected a floating-point theta, got "
                                              "int64"):
        affine_grid(ones(1, 2, 3, dtype=kiln.int64), (1, 1, 2, 2), align_corners=False)


# ------------------------------------------------------------------------------------------------
# Against PyTorch


def sample_pair(torch, x, grid, dtype, **kwargs):
    """grid_sample's output and its input and grid gradients for a random upstream, from Kiln
    and from PyTorch, in ``dtype``."""
    xs, gs = t(x, dtype).requires_grad_(), t(grid, dtype).requires_grad_()
    tx, tg = torch_twin(torch, x, dtype), torch_twin(torch, grid, dtype)
    try:
        want = torch.nn.functional.grid_sample(tx, tg, **kwargs)
    except RuntimeError as error:  # PyTorch before its 5-d "bicubic"
        pytest.skip(f"this PyTorch refuses it: {error}")
    out = grid_sample(xs, gs, **kwargs)
    upstream = np.random.default_rng(7).uniform(0.5, 2, size=tuple(want.shape))
    grads = kiln.autograd.grad(out, [xs, gs], t(upstream, dtype))
    wants = torch.autograd.grad(want, [tx, tg], torch_twin(torch, upstream, dtype, False))
    return (out, want), zip(("input gradient", "grid gradient"), grads, wants)


@pytest.mark.parametrize("rank", [2, 3])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("align", [False, True])
def test_matches_torch(torch, rank, mode, padding, align, rng):
    x, grid = operands(rng, rank, spread=2.5)
    (out, want), grads = sample_pair(torch, x, grid, kiln.float64, mode=mode,
                                     padding_mode=padding, align_corners=align)
    check_torch(out, want, kiln.float64, "value")
    for what, grad, expected in grads:
        check_torch(grad, expected, kiln.float64, what, scale_atol=True)


@pytest.mark.parametrize("shape", [(1, 2, 1, 4), (1, 2, 3, 1), (1, 1, 1, 1, 3)])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("padding", PADDINGS)
def test_unit_size_axes_match_torch(torch, shape, mode, padding, rng):
    rank = len(shape) - 2
    x, grid = rng.standard_normal(shape), rng.uniform(-2, 2, (1,) + (3,) * rank + (rank,))
    for align in (False, True):
        (out, want), grads = sample_pair(torch, x, grid, kiln.float64, mode=mode,
                                         padding_mode=padding, align_corners=align)
        check_torch(out, want, kiln.float64, "value")
        for what, grad, expected in grads:
            check_torch(grad, expected, kiln.float64, what, scale_atol=True)


@pytest.mark.parametrize("mode", MODES)
def test_float32_matches_torch(torch, mode, rng):
    # PyTorch's vectorized 2-d CPU kernel unnormalizes as (x + 1) * (size / 2) - 1/2, one
    # rounding away from GridSampler.h's ((x + 1) * size - 1) / 2: a few float32 units apart.
    x, grid = operands(rng, 2, spread=1.3)
    (out, want), grads = sample_pair(torch, x, grid, kiln.float32, mode=mode,
                                     padding_mode="reflection", align_corners=False)
    np.testing.assert_allclose(out.numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-5)
    for what, grad, expected in grads:
        np.testing.assert_allclose(grad.numpy(), expected.numpy(), rtol=1e-4, atol=1e-4,
                                   err_msg=what)


@pytest.mark.filterwarnings(f"ignore:{UNIT_SIZE}")
@pytest.mark.parametrize("size", [(2, 3, 4, 5), (2, 1, 3, 4, 5), (2, 3, 1, 5)])
@pytest.mark.parametrize("align", [False, True])
def test_affine_grid_matches_torch(torch, size, align, rng):
    rank = len(size) - 2
    theta = rng.standard_normal((size[0], rank, rank + 1))
    ts, tt = t(theta).requires_grad_(), torch_twin(torch, theta, kiln.float64)
    grid = affine_grid(ts, size, align_corners=align)
    want = torch.nn.functional.affine_grid(tt, size, align_corners=align)
    check_torch(grid, want, kiln.float64, "value")
    upstream = rng.standard_normal(tuple(want.shape))
    (grad,) = kiln.autograd.grad(grid, [ts], t(upstream))
    (expected,) = torch.autograd.grad(want, [tt], torch.tensor(upstream))
    check_torch(grad, expected, kiln.float64, "theta gradient")
