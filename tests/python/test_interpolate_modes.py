"""F.interpolate's modes beyond "nearest" and "bilinear" (kiln/nn/upsampling.py): "linear",
"trilinear", "bicubic", "area", "nearest-exact", 5-d "nearest", ``antialias=True`` and uint8
"bicubic", with the Upsample cell. Torch-free checks first (values and gradients against
per-axis NumPy weight matrices built from PyTorch's documented rules, closed forms, 16-bit
rounding, kiln.jit, errors), then the comparisons with PyTorch's CPU values and gradients through
the ``torch`` fixture."""

import math

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from conftest import FLOAT_DTYPES, check_torch, raises, random_array, t, torch_twin
from kiln.nn.upsampling import Upsample
from test_nn_port_layers import apply_axes, source_matrix

mint = kiln.mint


def assert_close(actual, expected, tolerance):
    np.testing.assert_allclose(np.asarray(actual.numpy(), np.float64), expected, rtol=tolerance,
                               atol=tolerance)


# ------------------------------------------------------------------------------------------------
# NumPy references: one [out, in] weight matrix per spatial axis


def keys_cubic(v, a):
    """The cubic convolution kernel with parameter ``a``, as a function of the distance."""
    v = abs(v)
    if v < 1:
        return ((a + 2) * v - (a + 3)) * v * v + 1
    if v < 2:
        return ((a * v - 5 * a) * v + 8 * a) * v - 4 * a
    return 0.0


def step_of(in_size, out_size, scale, align):
    if align:
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    return 1.0 / scale if scale else in_size / out_size


def nearest_exact_matrix(in_size, out_size, scale, dtype, small):
    """PyTorch's "nearest-exact": input floor((i + 1/2) * step); its vectorized 2-d kernel
    (``small``) takes the step in float32 and multiplies in float64, its generic one computes
    max((i + 1/2) * step - 1/2, 0) + 1/2 in ``dtype``."""
    rows = np.arange(out_size)
    if small:
        step = np.float64(np.float32(1.0 / scale if scale else np.float32(in_size) / out_size))
        position = (rows + 0.5) * step
    else:
        step = dtype(1.0 / scale) if scale else dtype(in_size) / dtype(out_size)
        position = np.maximum(step * (rows.astype(dtype) + dtype(0.5)) - dtype(0.5), 0) + 0.5
    index = np.minimum(np.floor(position.astype(np.float32)).astype(int), in_size - 1)
    matrix = np.zeros((out_size, in_size))
    matrix[rows, index] = 1
    return matrix


def cubic_matrix(in_size, out_size, scale, align):
    """PyTorch's bicubic: the 4 inputs around (i + 1/2) * step - 1/2 (i * step with
    align_corners), weighted by the cubic kernel with A = -0.75, indices clamped to the input."""
    matrix = np.zeros((out_size, in_size))
    step = step_of(in_size, out_size, scale, align)
    for i in range(out_size):
        source = step * i if align else step * (i + 0.5) - 0.5
        low = min(math.floor(source), in_size - 1)
        fraction = min(max(source - low, 0.0), 1.0)
        for k in range(-1, 3):
            matrix[i, min(max(low + k, 0), in_size - 1)] += keys_cubic(k - fraction, -0.75)
    return matrix


def area_matrix(in_size, out_size):
    """The mean over PyTorch's adaptive window, from floor(i * in / out) to ceil((i + 1) * in /
    out)."""
    matrix = np.zeros((out_size, in_size))
    for i in range(out_size):
        start, end = i * in_size // out_size, -(-(i + 1) * in_size // out_size)
        matrix[i, start:end] = 1 / (end - start)
    return matrix


def antialias_matrix(in_size, out_size, scale, align, cubic):
    """PIL's (and PyTorch's) antialiased resampling: input j weighted by the filter (triangle, or
    cubic with A = -0.5) at (j + 1/2 - center) / max(step, 1), center (i + 1/2) * step, over the
    inputs within the filter's support times max(step, 1), normalised per output."""
    step = step_of(in_size, out_size, scale, align)
    stretch = max(step, 1.0)
    support = (2.0 if cubic else 1.0) * stretch
    matrix = np.zeros((out_size, in_size))
    for i in range(out_size):
        center = step * (i + 0.5)
        for j in range(max(int(center - support + 0.5), 0),
                       min(int(center + support + 0.5), in_size)):
            v = (j + 0.5 - center) / stretch
            matrix[i, j] = keys_cubic(v, -0.5) if cubic else max(1 - abs(v), 0.0)
        matrix[i] /= matrix[i].sum()
    return matrix


def axis_matrix(mode, in_size, out_size, scale, align, antialias, dtype, small):
    if antialias and out_size == in_size:
        return np.eye(in_size)  # PyTorch's separable passes skip the axis
    if antialias:
        return antialias_matrix(in_size, out_size, scale, align, mode == "bicubic")
    if mode == "nearest":
        # The small-output 2-d kernel: float32, with shortcuts; the generic one: the input's
        # precision, none.
        return source_matrix(in_size, out_size, "nearest", False, scale,
                             np.float32 if small else dtype, shortcuts=small)
    if mode == "nearest-exact":
        return nearest_exact_matrix(in_size, out_size, scale, dtype, small)
    if mode == "area":
        return area_matrix(in_size, out_size)
    if mode == "bicubic":
        return cubic_matrix(in_size, out_size, scale, align)
    return source_matrix(in_size, out_size, "linear", align, scale, dtype)


def output_sizes(spatial, size, scale, recompute):
    """(the output's spatial sizes, the scale_factor per axis that steps the positions)."""
    if scale is None:
        sizes = size if isinstance(size, tuple) else (size,) * len(spatial)
        return sizes, (None,) * len(spatial)
    scales = scale if isinstance(scale, tuple) else (scale,) * len(spatial)
    sizes = tuple(math.floor(n * f) for n, f in zip(spatial, scales))
    return sizes, ((None,) * len(spatial) if recompute else scales)


def expected_matrices(spatial, size, scale, recompute, mode, align, antialias, dtype):
    sizes, scales = output_sizes(spatial, size, scale, recompute)
    small = len(spatial) == 2 and sum(sizes) <= 128
    return [axis_matrix(mode, n, o, f, align, antialias, dtype, small)
            for n, o, f in zip(spatial, sizes, scales)]


# ------------------------------------------------------------------------------------------------
# Cases

# (input's spatial shape, size, scale_factor, recompute_scale_factor), per rank
RESIZES = {
    1: [((7,), 11, None, None), ((7,), 4, None, None), ((7,), None, 0.45, None),
        ((7,), None, 2.05, None),  # size 14, twice the input's
        ((7,), None, 1.01, None),  # size 7, the input's, with a step of 1 / 1.01
        ((7,), None, 2.5, True), ((7,), 1, None, None)],
    2: [((5, 6), (7, 9), None, None), ((5, 6), (3, 2), None, None),
        ((5, 6), None, (1.7, 0.6), None), ((5, 6), None, 2, None),
        ((5, 6), None, (1.01, 2.05), None),  # sizes 5 and 12: the input's and twice it
        ((5, 6), None, 2.5, True), ((5, 6), (1, 1), None, None), ((9, 8), (4, 1), None, None),
        ((3, 64), None, (1.0, 2.01), None)],  # height + width 131: PyTorch's generic 2-d kernel
    3: [((3, 4, 5), (5, 3, 7), None, None), ((3, 4, 5), None, (0.7, 1.5, 2.0), None),
        ((3, 4, 5), None, (1.0, 2.05, 0.5), None), ((3, 4, 5), None, 1.5, True),
        ((3, 4, 5), 1, None, None)],
}
# (mode, the spatial ranks it takes, its align_corners values, antialias)
MODES = [
    ("nearest", (1, 2, 3), (None,), False),
    ("nearest-exact", (1, 2, 3), (None,), False),
    ("area", (1, 2, 3), (None,), False),
    ("linear", (1,), (None, False, True), False),
    ("trilinear", (3,), (None, False, True), False),
    ("bicubic", (2,), (None, False, True), False),
    ("bilinear", (2,), (False, True), True),
    ("bicubic", (2,), (False, True), True),
]

def cases(modes):
    for mode, ranks, aligns, antialias in modes:
        for rank in ranks:
            for spatial, size, scale, recompute in RESIZES[rank]:
                for align in aligns:
                    yield spatial, size, scale, recompute, mode, align, antialias


CASES = list(cases(MODES))


def case_id(case):
    spatial, size, scale, recompute, mode, align, antialias = case
    return (f"{mode}{'-aa' if antialias else ''}-{'x'.join(map(str, spatial))}-align{align}"
            f"-size{size}-scale{scale}-recompute{recompute}")


def resize(x, case):
    _, size, scale, recompute, mode, align, antialias = case
    return F.interpolate(x, size, scale, mode, align, recompute, antialias)


# ------------------------------------------------------------------------------------------------
# Against NumPy


# float32 positions near 64 are exact to 2 ** -18 only (PyTorch computes them in float32), so the
# weights of the 64-wide case differ from float64 ones by a few 1e-6.
@pytest.mark.parametrize("dtype, np_dtype, tolerance", [(kiln.float64, np.float64, 1e-12),
                                                        (kiln.float32, np.float32, 3e-5)],
                         ids=["float64", "float32"])
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_interpolate_matches_numpy_with_its_gradient(case, dtype, np_dtype, tolerance, rng):
    spatial, size, scale, recompute, mode, align, antialias = case
    v = rng.uniform(-2, 2, size=(2, 3) + spatial).astype(np_dtype)
    x = t(v, dtype).requires_grad_()
    out = resize(x, case)
    matrices = expected_matrices(spatial, size, scale, recompute, mode, align, antialias,
                                 np_dtype)
    expected = apply_axes(v.astype(np.float64), matrices)
    assert out.dtype == dtype and out.shape == expected.shape
    assert_close(out, expected, tolerance)
    upstream = rng.uniform(0.5, 2, size=expected.shape)
    (grad,) = kiln.autograd.grad(out, x, t(upstream, dtype))
    assert_close(grad, apply_axes(upstream, matrices, transpose=True), tolerance)


def test_closed_forms():
    ramp = t([[[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]]])
    # Corners aligned: evenly spaced from the first input to the last.
    assert_close(F.interpolate(ramp, size=11, mode="linear", align_corners=True),
                 [[np.linspace(0, 5, 11)]], 1e-12)
    # Windows [0, 2), [1, 3), [3, 5), [4, 6): they overlap where 6 / 4 is not whole.
    assert_close(F.interpolate(ramp, size=4, mode="area"), [[[0.5, 1.5, 3.5, 4.5]]], 1e-12)
    # Step 6 / 4: "nearest-exact" reads floor((i + 1/2) * 1.5), "nearest" floor(i * 1.5).
    np.testing.assert_array_equal(F.interpolate(ramp, size=4, mode="nearest-exact").numpy(),
                                  [[[0, 2, 3, 5]]])
    np.testing.assert_array_equal(F.interpolate(ramp, size=4).numpy(), [[[0, 1, 3, 4]]])
    image = t(np.arange(8.0).reshape(1, 1, 1, 8) ** 2)
    # Halving with antialias: the triangle widened to 4 inputs, weights 1, 3, 3, 1 (cut at the
    # borders to 3, 3, 1), normalised.
    v = image.numpy()[0, 0, 0]
    assert_close(F.interpolate(image, size=(1, 4), mode="bilinear", antialias=True),
                 [[[[(3 * v[0] + 3 * v[1] + v[2]) / 7, (v[1] + 3 * v[2] + 3 * v[3] + v[4]) / 8,
                     (v[3] + 3 * v[4] + 3 * v[5] + v[6]) / 8,
                     (v[5] + 3 * v[6] + 3 * v[7]) / 7]]]], 1e-12)
    # With corners aligned, every other output of 2n - 1 is an input, exactly.
    grid = t(np.arange(12.0).reshape(1, 1, 3, 4) ** 2)
    out = F.interpolate(grid, size=(5, 7), mode="bicubic", align_corners=True)
    np.testing.assert_array_equal(out.numpy()[..., ::2, ::2], grid.numpy())
    # The cubic weights sum to 1: a constant stays constant, antialiased or not.
    flat = mint.full((1, 2, 5, 6), 3.0, dtype=kiln.float64)
    for kwargs in (dict(size=(9, 4)), dict(size=(2, 3), antialias=True)):
        assert_close(F.interpolate(flat, mode="bicubic", **kwargs), 3.0, 1e-12)


def test_nearest_takes_pytorchs_small_2d_kernel_shortcut_only():
    # Twice the input's width with scale_factor 2.01: PyTorch's vectorized kernel (height +
    # width <= 128) takes input i // 2, its generic one floor(i / 2.01).
    for width, expected in ((5, np.arange(10) // 2), (64, np.floor(np.arange(128) / 2.01))):
        x = t(np.arange(float(width)).reshape(1, 1, 1, width))
        out = F.interpolate(x, scale_factor=(1, 2.01))
        np.testing.assert_array_equal(out.numpy()[0, 0, 0], expected)
    volume = t(np.arange(5.0).reshape(1, 1, 1, 1, 5))
    np.testing.assert_array_equal(F.interpolate(volume, scale_factor=(1, 1, 2.01)).numpy().ravel(),
                                  [0, 0, 0, 1, 1, 2, 2, 3, 3, 4])


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
@pytest.mark.parametrize("dtype", [kiln.int64, kiln.uint8, kiln.bool_], ids=lambda d: d.name)
def test_nearest_modes_resize_any_dtype_at_any_rank(mode, dtype):
    x = t(np.array([0, 1, 1, 0, 1]).reshape(1, 1, 1, 1, 5), dtype)
    out = F.interpolate(x, size=(2, 1, 3), mode=mode)
    assert out.dtype == dtype
    index = [0, 1, 3] if mode == "nearest" else [0, 2, 4]
    np.testing.assert_array_equal(out.numpy(), np.broadcast_to(x.numpy()[..., index],
                                                               (1, 1, 2, 1, 3)))


SIXTEEN_BIT = [
    (3, dict(size=11, mode="linear")),
    (5, dict(scale_factor=1.7, mode="trilinear", align_corners=True)),
    (4, dict(size=(9, 4), mode="bicubic")),
    (4, dict(size=(3, 2), mode="bicubic", antialias=True)),
    (4, dict(scale_factor=0.45, mode="bilinear", antialias=True)),
    (5, dict(size=(2, 3, 4), mode="area")),
    (3, dict(scale_factor=0.6, mode="area")),
]


@pytest.mark.parametrize("rank, kwargs", SIXTEEN_BIT, ids=lambda c: str(c))
@pytest.mark.parametrize("dtype", [kiln.float16, kiln.bfloat16], ids=lambda d: d.name)
def test_16_bit_floats_are_computed_in_float32(rank, kwargs, dtype, rng):
    v = random_array((2, 3) + (7, 6, 5)[:rank - 2], dtype, rng).astype(np.float64)
    out = F.interpolate(t(v, dtype), **kwargs)
    wide = F.interpolate(t(v, kiln.float32), **kwargs)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out.numpy(), wide.to(dtype).numpy())


def test_uint8_bicubic_saturates_and_keeps_constants():
    edge = t(np.array([[[[0, 0, 255, 255]]]], np.uint8))
    out = F.interpolate(edge, size=(1, 8), mode="bicubic")
    # The cubic overshoots on either side of the edge (-9, -27, 282 and 264 in float32); uint8
    # clamps it to [0, 255].
    wide = F.interpolate(edge.to(kiln.float32), size=(1, 8), mode="bicubic").numpy()
    assert wide.min() < -20 and wide.max() > 280
    np.testing.assert_array_equal(out.numpy(), np.clip(np.round(wide), 0, 255))
    flat = t(np.full((1, 2, 5, 6), 200, np.uint8))
    for kwargs in (dict(size=(9, 4)), dict(size=(2, 3), antialias=True),
                   dict(scale_factor=2.5, align_corners=True)):
        np.testing.assert_array_equal(F.interpolate(flat, mode="bicubic", **kwargs).numpy(), 200)


JIT_CASES = [
    ((2, 3, 7), dict(scale_factor=1.6, mode="linear")),
    ((2, 3, 3, 4, 5), dict(size=(4, 6, 3), mode="trilinear", align_corners=True)),
    ((2, 3, 5, 6), dict(scale_factor=(1.5, 0.7), mode="bicubic")),
    ((2, 3, 7, 8), dict(size=(3, 5), mode="area")),
    ((2, 3, 3, 4, 5), dict(scale_factor=0.6, mode="area")),
    ((2, 3, 5, 6), dict(size=(7, 4), mode="nearest-exact")),
    ((2, 3, 3, 4, 5), dict(scale_factor=1.5, mode="nearest")),
    ((2, 3, 9, 8), dict(size=(4, 3), mode="bilinear", antialias=True)),
    ((2, 3, 9, 8), dict(size=(4, 3), mode="bicubic", antialias=True)),
]


@pytest.mark.parametrize("shape, kwargs", JIT_CASES, ids=lambda c: str(c))
def test_each_mode_traces_under_jit(shape, kwargs, rng):
    x = t(rng.standard_normal(shape), kiln.float32)
    step = kiln.jit(lambda x: F.interpolate(x, **kwargs))
    eager = F.interpolate(x, **kwargs).numpy()
    for _ in range(2):  # the weights and indices built at the trace do not make later calls miss
        np.testing.assert_array_equal(step(x).numpy(), eager)
    assert step.cache_info().hits == 1


def test_uint8_bicubic_traces_under_jit(rng):
    x = t(rng.integers(0, 256, size=(1, 2, 5, 6)).astype(np.uint8))
    for kwargs in (dict(scale_factor=1.7), dict(size=(2, 3), antialias=True)):
        step = kiln.jit(lambda x: F.interpolate(x, mode="bicubic", **kwargs))
        np.testing.assert_array_equal(step(x).numpy(),
                                      F.interpolate(x, mode="bicubic", **kwargs).numpy())


# ------------------------------------------------------------------------------------------------
# Errors

MODE_LIST = "'nearest', 'nearest-exact', 'linear', 'bilinear', 'bicubic', 'trilinear' or 'area'"


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(mode="cubic"), kiln.KilnValueError,
     f"interpolate: expected mode {MODE_LIST}, got 'cubic'"),
    (dict(mode=None), kiln.KilnValueError, "expected mode .*, got None"),
    (dict(mode="lanczos", antialias=True), kiln.KilnNotImplementedError,
     "interpolate: mode 'lanczos' is not supported"),
    (dict(mode="nearest-exact", align_corners=False), kiln.KilnValueError,
     "interpolate: align_corners applies to modes 'linear', 'bilinear', 'bicubic' and "
     "'trilinear' only; expected None with mode 'nearest-exact', got False"),
    (dict(mode="area", align_corners=True), kiln.KilnValueError,
     "expected None with mode 'area', got True"),
    (dict(mode="nearest", antialias=True), kiln.KilnValueError,
     "interpolate: antialias=True applies to modes 'bilinear' and 'bicubic' only, got mode "
     "'nearest'"),
    (dict(mode="area", antialias=True), kiln.KilnValueError, "got mode 'area'"),
    (dict(mode="bilinear", antialias=1), kiln.KilnTypeError,
     "interpolate: antialias must be a bool, got int 1"),
    (dict(mode="bicubic", align_corners="yes"), kiln.KilnTypeError,
     "interpolate: align_corners must be a bool"),
])
def test_argument_errors(kwargs, error, message):
    with raises(error, match=message):
        F.interpolate(mint.ones(1, 2, 3, 4), size=2, **kwargs)


@pytest.mark.parametrize("shape, mode, message", [
    ((1, 2, 3, 4), "linear", r"expected input \[N, C, L\] with no empty spatial dimension for "
                             r"mode 'linear', got \[1, 2, 3, 4\]"),
    ((1, 2, 3), "bicubic", r"expected input \[N, C, H, W\] .* mode 'bicubic', got \[1, 2, 3\]"),
    ((1, 2, 3, 4), "trilinear", r"expected input \[N, C, D, H, W\] .* mode 'trilinear'"),
    ((1, 2, 3, 4, 5), "bilinear", r"expected input \[N, C, H, W\] .* got \[1, 2, 3, 4, 5\]"),
    ((1, 2), "area", r"expected input \[N, C, L\] or \[N, C, H, W\] or \[N, C, D, H, W\] "),
    ((1, 2, 3, 4, 5, 6), "nearest-exact", r".* mode 'nearest-exact', got \[1, 2, 3, 4, 5, 6\]"),
    ((1, 2, 3, 0, 5), "trilinear", r".* got \[1, 2, 3, 0, 5\]"),
])
def test_rank_errors(shape, mode, message):
    with raises(kiln.ShapeError, match="interpolate: " + message):
        F.interpolate(mint.ones(shape), size=2, mode=mode)


@pytest.mark.parametrize("shape, mode, dtype, message", [
    ((1, 1, 4), "linear", kiln.int64,
     r"got int64 \(mode 'linear' takes floating-point input only, as PyTorch's\)"),
    ((1, 1, 4, 4), "area", kiln.uint8,
     r"got uint8 \(mode 'area' takes floating-point input only, as PyTorch's\)"),
    ((1, 1, 2, 2, 2), "trilinear", kiln.bool_, "got bool"),
    ((1, 1, 4, 4), "bicubic", kiln.int32,
     r"got int32 \(mode 'bicubic' also takes uint8, as PyTorch's\)"),
])
def test_dtype_errors(shape, mode, dtype, message):
    with raises(kiln.DTypeError, match="interpolate: expected a floating-point input, " + message):
        F.interpolate(mint.zeros(shape, dtype=dtype), size=2, mode=mode)


def test_size_per_axis_of_a_volume():
    with raises(kiln.ShapeError, match=r"expected size as one value or 3 \(one per spatial "
                                       r"dimension of the input\), got \(2, 2\)"):
        F.interpolate(mint.ones(1, 1, 2, 2, 2), size=(2, 2), mode="trilinear")


# ------------------------------------------------------------------------------------------------
# Upsample


def test_upsample_takes_every_mode(rng):
    x = t(rng.standard_normal((1, 2, 3, 4, 5)))
    for kwargs in (dict(scale_factor=(1.5, 2, 0.5), mode="trilinear", align_corners=True),
                   dict(size=(2, 3, 4), mode="area"), dict(size=6, mode="nearest-exact"),
                   dict(scale_factor=1.5, mode="nearest")):
        cell = Upsample(**kwargs)
        np.testing.assert_array_equal(cell(x).numpy(), F.interpolate(x, **kwargs).numpy())
    image = t(rng.standard_normal((1, 2, 3, 4)))
    cell = Upsample(scale_factor=2, mode="bicubic", align_corners=False)
    np.testing.assert_array_equal(cell(image).numpy(), F.interpolate(
        image, scale_factor=2, mode="bicubic", align_corners=False).numpy())
    assert (repr(Upsample(scale_factor=(1.5, 2, 0.5), mode="trilinear"))
            == "Upsample(scale_factor=(1.5, 2.0, 0.5), mode='trilinear')")
    assert repr(Upsample(size=4, mode="area")) == "Upsample(size=4, mode='area')"


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(size=2, mode="box"), kiln.KilnValueError, f"Upsample: expected mode {MODE_LIST}"),
    (dict(size=2, mode="lanczos"), kiln.KilnNotImplementedError,
     "Upsample: mode 'lanczos' is not supported"),
    (dict(size=2, mode="area", align_corners=False), kiln.KilnValueError,
     "Upsample: align_corners applies to modes 'linear', 'bilinear', 'bicubic' and 'trilinear' "
     "only; expected None with mode 'area', got False"),
])
def test_upsample_checks_new_modes_at_construction(kwargs, error, message):
    with raises(error, match=message):
        Upsample(**kwargs)


# ------------------------------------------------------------------------------------------------
# Against PyTorch


def torch_gradient_is_consistent(case):
    """False where PyTorch's backward breaks from its forward (see interpolate's documentation):
    "nearest" outside the small 2-d kernel where an axis's size is kept or doubled by a
    scale_factor used as it is (the backward takes the shortcuts the forward does not), and,
    where such a scale_factor keeps an axis's size, "bicubic" (its backward copies if no axis
    changes) and antialias (its backward resamples the axis its forward skips)."""
    spatial, size, scale, recompute, mode, align, antialias = case
    sizes, scales = output_sizes(spatial, size, scale, recompute)
    kept = [o == n and f is not None for n, o, f in zip(spatial, sizes, scales)]
    if mode == "nearest":
        small = len(spatial) == 2 and sum(sizes) <= 128
        return small or not any(o in (n, 2 * n) and f is not None
                                for n, o, f in zip(spatial, sizes, scales))
    if antialias:
        return not any(kept)
    if mode == "bicubic":
        return not all(o == n for n, o in zip(spatial, sizes)) or not any(kept)
    return True


# PyTorch's antialiased kernels take float32 and float64 only.
TORCH_CASES = [(case, dtype) for case in CASES for dtype in FLOAT_DTYPES
               if not (case[6] and dtype in (kiln.float16, kiln.bfloat16))]


@pytest.mark.parametrize("case, dtype", TORCH_CASES,
                         ids=[f"{case_id(case)}-{dtype.name}" for case, dtype in TORCH_CASES])
def test_interpolate_matches_torch(torch, case, dtype, rng):
    spatial, size, scale, recompute, mode, align, antialias = case
    v = random_array((2, 3) + spatial, dtype, rng)
    x = t(v, dtype).requires_grad_()
    tx = torch_twin(torch, v, dtype)
    out = resize(x, case)
    # PyTorch's antialiased NCHW kernel reads only the first row for an output of width 1 (a
    # bug); its channels-last order takes the same path as the others.
    source = tx.contiguous(memory_format=torch.channels_last) if antialias else tx
    want = torch.nn.functional.interpolate(source, size, scale, mode, align, recompute,
                                           antialias)
    assert out.dtype == dtype and out.shape == tuple(want.shape)
    if mode == "bicubic" and dtype == kiln.float32:
        # PyTorch's float32 cubic weights are exact to about 1e-6 only (the cubic's terms cancel
        # near the ends of its taps, and its compiler fuses some of them), as are Kiln's.
        atol = 1e-5 * float(want.detach().abs().max())
        np.testing.assert_allclose(out.numpy(), want.detach().numpy(), rtol=1e-5, atol=atol)
    else:
        check_torch(out, want, dtype, "value", scale_atol=True)
    if not torch_gradient_is_consistent(case):
        return
    upstream = random_array(out.shape, dtype, rng, 0.5, 2.0)
    (grad,) = kiln.autograd.grad(out, x, t(upstream, dtype))
    (expected,) = torch.autograd.grad(want, tx, torch_twin(torch, upstream, dtype, False))
    check_torch(grad, expected, dtype, "gradient", scale_atol=True)


def test_uint8_modes_match_torch_exactly(torch, rng):
    for _ in range(60):
        h, w = (int(v) for v in rng.integers(1, 12, size=2))
        channels = int(rng.choice([1, 3, 4, 6]))
        x = rng.integers(0, 256, size=(2, channels, h, w)).astype(np.uint8)
        factors = tuple(float(f) for f in rng.uniform(0.2, 3.2, size=2))
        if 0 in (math.floor(h * factors[0]), math.floor(w * factors[1])):
            continue
        sizes = tuple(int(v) for v in rng.integers(1, 14, size=2))
        # PyTorch's uint8 kernel for more than 4 channels in NCHW order gives wrong values for
        # a width of 1 (the separable pass reads the first row only); its channels-last order
        # takes the same path as the others.
        tx = torch.tensor(x).contiguous(memory_format=torch.channels_last)
        for kwargs in (dict(scale_factor=factors), dict(size=sizes)):
            for mode, antialias, align in (("bilinear", False, False), ("bilinear", False, True),
                                           ("bicubic", False, False), ("bicubic", False, True),
                                           ("bicubic", True, False), ("bilinear", True, True)):
                want = torch.nn.functional.interpolate(tx, mode=mode, align_corners=align,
                                                       antialias=antialias, **kwargs)
                out = F.interpolate(t(x), mode=mode, align_corners=align, antialias=antialias,
                                    **kwargs)
                np.testing.assert_array_equal(
                    out.numpy(), want.numpy(), err_msg=f"{x.shape} {mode} {kwargs} {align}")


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
def test_nearest_modes_match_torch_at_random_sizes(torch, mode, rng):
    for _ in range(60):
        rank = int(rng.integers(1, 4))
        spatial = tuple(int(v) for v in rng.integers(1, 40 if rank < 3 else 10, size=rank))
        if rank == 2 and rng.random() < 0.5:  # past PyTorch's small-output kernel
            spatial = tuple(int(v) for v in rng.integers(40, 90, size=2))
        if rng.random() < 0.5:
            kwargs = dict(size=tuple(int(v) for v in rng.integers(1, 3 * max(spatial) + 2,
                                                                   size=rank)))
        else:
            kwargs = dict(scale_factor=tuple(float(f) for f in rng.uniform(0.3, 3.0, size=rank)))
            if 0 in [math.floor(n * f) for n, f in zip(spatial, kwargs["scale_factor"])]:
                continue
        for np_dtype in (np.float64, np.float32, np.uint8):
            v = rng.integers(0, 255, size=(1, 2) + spatial).astype(np_dtype)
            want = torch.nn.functional.interpolate(torch.tensor(v), mode=mode, **kwargs)
            np.testing.assert_array_equal(F.interpolate(t(v), mode=mode, **kwargs).numpy(),
                                          want.numpy(), err_msg=f"{spatial} {kwargs}")


def test_upsample_repr_matches_torch(torch):
    for kwargs in (dict(scale_factor=(1.5, 2.0, 0.5), mode="trilinear"),
                   dict(size=(3, 4), mode="bicubic", align_corners=True),
                   dict(size=5, mode="nearest-exact"), dict(scale_factor=0.5, mode="area")):
        assert repr(Upsample(**kwargs)) == repr(torch.nn.Upsample(**kwargs))
