"""Sliding blocks and bags of embeddings, as PyTorch's: unfold / fold and the cells Unfold / Fold
(kiln/nn/fold.py), embedding_bag (kiln/nn/_embedding_functions.py) and the cell EmbeddingBag
(kiln/nn/embedding.py). Torch-free checks against NumPy loops, finite differences and kiln.jit
first, then comparisons with PyTorch through the ``torch`` fixture."""

import numpy as np
import pytest

import kiln
from conftest import assert_close, check_torch, close, raises, t
from kiln import nn
from kiln.nn.functional import embedding_bag
from kiln.nn.embedding import EmbeddingBag
from kiln.nn.fold import Fold, Unfold, fold, unfold

mint = kiln.mint

# ------------------------------------------------------------------------------------------------
# unfold / fold


def blocks_along(size, kernel, dilation, padding, stride):
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def im2col(x, kernel, dilation, padding, stride):
    """PyTorch's im2col of x [N, C, H, W] with pairs of arguments, one element at a time."""
    n, c, h, w = x.shape
    bh, bw = (blocks_along(s, k, d, p, st)
              for s, k, d, p, st in zip((h, w), kernel, dilation, padding, stride))
    padded = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    cols = np.zeros((n, c, kernel[0], kernel[1], bh, bw), x.dtype)
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            for r in range(bh):
                for q in range(bw):
                    cols[:, :, i, j, r, q] = padded[:, :, r * stride[0] + i * dilation[0],
                                                    q * stride[1] + j * dilation[1]]
    return cols.reshape(n, c * kernel[0] * kernel[1], bh * bw)


def col2im(cols, size, kernel, dilation, padding, stride):
    """PyTorch's col2im of cols [N, C * kH * kW, L] into [N, C, *size], overlaps added."""
    n = cols.shape[0]
    c = cols.shape[1] // (kernel[0] * kernel[1])
    bh, bw = (blocks_along(s, k, d, p, st)
              for s, k, d, p, st in zip(size, kernel, dilation, padding, stride))
    cols = cols.reshape(n, c, kernel[0], kernel[1], bh, bw)
    out = np.zeros((n, c, size[0] + 2 * padding[0], size[1] + 2 * padding[1]), cols.dtype)
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            for r in range(bh):
                for q in range(bw):
                    out[:, :, r * stride[0] + i * dilation[0],
                        q * stride[1] + j * dilation[1]] += cols[:, :, i, j, r, q]
    return out[:, :, padding[0]:padding[0] + size[0], padding[1]:padding[1] + size[1]]


def pair(value):
    return value if isinstance(value, tuple) else (value, value)


# (image size, kwargs): the geometry as ints, as pairs, and with gaps between blocks.
GEOMETRIES = [
    ((5, 6), dict(kernel_size=3)),
    ((5, 6), dict(kernel_size=(2, 3), dilation=(2, 1), padding=(1, 2), stride=(2, 1))),
    ((7, 5), dict(kernel_size=1, stride=3)),
    ((6, 7), dict(kernel_size=(3, 2), dilation=2, padding=1, stride=2)),
]
GEOMETRY_IDS = ["plain", "pairs", "gaps", "ints"]


def geometry(kwargs):
    """kwargs as the pairs (kernel, dilation, padding, stride) of the NumPy loops."""
    return tuple(pair(kwargs.get(name, default)) for name, default in (
        ("kernel_size", None), ("dilation", 1), ("padding", 0), ("stride", 1)))


@pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64])
@pytest.mark.parametrize("size, kwargs", GEOMETRIES, ids=GEOMETRY_IDS)
def test_unfold_and_fold_match_numpy_loops(size, kwargs, dtype, batched, rng):
    x = rng.standard_normal((2, 3) + size).astype(dtype.name)
    want = im2col(x, *geometry(kwargs))
    cols = rng.standard_normal(want.shape).astype(dtype.name)
    back = col2im(cols, size, *geometry(kwargs))
    if not batched:
        x, want, cols, back = x[0], want[0], cols[0], back[0]
    assert_close(unfold(t(x), **kwargs), want)
    assert_close(fold(t(cols), size, **kwargs), back)


def test_unfold_takes_integers_and_an_empty_batch(rng):
    x = rng.integers(-9, 9, size=(2, 2, 4, 4))
    assert_close(unfold(t(x), 2, stride=2), im2col(x, (2, 2), (1, 1), (0, 0), (2, 2)))
    assert unfold(t(x[:0]).to(kiln.float32), 2).shape == (0, 8, 9)
    assert fold(mint.zeros(0, 8, 9), (4, 4), 2).shape == (0, 2, 4, 4)


@pytest.mark.parametrize("size, kwargs", GEOMETRIES, ids=GEOMETRY_IDS)
def test_fold_is_the_adjoint_of_unfold(size, kwargs, rng):
    x = rng.standard_normal((2, 2) + size)
    y = rng.standard_normal(tuple(unfold(t(x), **kwargs).shape))
    lhs = float(mint.sum(unfold(t(x), **kwargs) * t(y)).item())
    rhs = float(mint.sum(t(x) * fold(t(y), size, **kwargs)).item())
    assert abs(lhs - rhs) < 1e-10


def test_unfold_and_fold_gradients_match_finite_differences(rng):
    kwargs = dict(kernel_size=(2, 3), dilation=(2, 1), padding=1, stride=(1, 2))
    x = t(rng.standard_normal((1, 2, 4, 5))).requires_grad_()
    kiln.testing.gradcheck(lambda v: unfold(v, **kwargs), (x,))
    cols = t(rng.standard_normal(tuple(unfold(x, **kwargs).shape))).requires_grad_()
    kiln.testing.gradcheck(lambda v: fold(v, (4, 5), **kwargs), (cols,))


def test_unfold_and_fold_under_jit_equal_eager(rng):
    kwargs = dict(kernel_size=(2, 3), dilation=(2, 1), padding=(1, 2), stride=(2, 1))
    weight = t(rng.standard_normal((2, 18, 24)))

    def loss(x):
        return mint.sum(fold(unfold(x, **kwargs) * weight, (5, 6), **kwargs) ** 2)

    x = t(rng.standard_normal((2, 3, 5, 6)))
    close(kiln.jit(lambda v: unfold(v, **kwargs))(x), unfold(x, **kwargs).numpy(), 0, 0)
    close(kiln.jit(loss)(x), loss(x).numpy(), rtol=1e-12, atol=1e-12)
    close(kiln.jit(kiln.grad(loss))(x), kiln.grad(loss)(x).numpy(), rtol=1e-12, atol=1e-12)


def test_unfold_and_fold_cells_keep_their_arguments_and_call_the_functions(rng):
    cell = Unfold((2, 3), padding=1, stride=(1, 2))
    assert repr(cell) == "Unfold(kernel_size=(2, 3), dilation=1, padding=1, stride=(1, 2))"
    inverse = Fold([5, 6], (2, 3), padding=1, stride=(1, 2))
    assert repr(inverse) == ("Fold(output_size=[5, 6], kernel_size=(2, 3), dilation=1, "
                             "padding=1, stride=(1, 2))")
    x = t(rng.standard_normal((2, 3, 5, 6)))
    cols = cell(x)
    close(cols, unfold(x, (2, 3), padding=1, stride=(1, 2)).numpy(), 0, 0)
    close(inverse(cols), fold(cols, (5, 6), (2, 3), padding=1, stride=(1, 2)).numpy(), 0, 0)
    assert not list(cell.parameters()) and cell.state_dict() == {}


@pytest.mark.parametrize("call, error, match", [
    (lambda: unfold(mint.ones(2, 3, 4, 5), 0), kiln.KilnValueError,
     r"unfold: expected kernel_size >= 1, got 0"),
    (lambda: unfold(mint.ones(2, 3, 4, 5), 2, padding=-1), kiln.KilnValueError,
     r"unfold: expected padding >= 0, got -1"),
    (lambda: unfold(mint.ones(2, 3, 4, 5), 2, stride=(1, 0)), kiln.KilnValueError,
     r"unfold: expected stride >= 1, got \(1, 0\)"),
    (lambda: unfold(mint.ones(2, 3, 4, 5), (2, 2, 2)), kiln.KilnValueError,
     r"unfold: expected kernel_size to be an int or a sequence of two ints, got 3 "
     r"sizes \(2, 2, 2\)"),
    (lambda: unfold(mint.ones(2, 3, 4, 5), 2.0), kiln.KilnTypeError,
     r"unfold: expected kernel_size to be an int or a sequence of two ints, got float 2.0"),
    (lambda: unfold(mint.ones(2, 3, 4, 5), (2, 1.5)), kiln.KilnTypeError,
     r"unfold: kernel_size\[1\] must be an int, got float 1.5"),
    (lambda: unfold(np.ones((2, 3, 4, 5)), 2), kiln.KilnTypeError,
     r"unfold: expected input to be a kiln.Tensor, got ndarray"),
    (lambda: unfold(mint.ones(4, 5), 2), kiln.ShapeError,
     r"unfold: expected input \[N, C, H, W\] or one sample \[C, H, W\], with sizes other than "
     r"N non-zero, got \[4, 5\]"),
    (lambda: unfold(mint.ones(2, 0, 4, 5), 2), kiln.ShapeError,
     r"unfold: expected input .* got \[2, 0, 4, 5\]"),
    (lambda: unfold(mint.ones(2, 3, 4, 5), 5), kiln.ShapeError,
     r"unfold: given input with spatial size \(4, 5\), kernel_size=\(5, 5\), dilation=\(1, 1\), "
     r"padding=\(0, 0\), the array of sliding blocks would be \(0, 1\); expected at least one "
     r"block along each dimension"),
    (lambda: fold(mint.ones(2, 12, 12), (4, 5), 5), kiln.ShapeError,
     r"fold: expected size of input's dimension 1 \(C \* kH \* kW\) to be divisible by the "
     r"product of kernel_size \(5, 5\) \(25\), got 12, of input \[2, 12, 12\]"),
    (lambda: fold(mint.ones(2, 12, 12), (4, 4), 2), kiln.ShapeError,
     r"fold: given output_size=\(4, 4\), kernel_size=\(2, 2\), dilation=\(1, 1\), "
     r"padding=\(0, 0\), stride=\(1, 1\), expected size of input's last dimension to match the "
     r"number of sliding blocks 3 \* 3 = 9, got 12, of input \[2, 12, 12\]"),
    (lambda: fold(mint.ones(2, 12, 12), (1, 1), 2), kiln.ShapeError,
     r"number of sliding blocks 0 \* 0 = 0, got 12"),
    (lambda: fold(mint.ones(2, 3, 4, 5), (4, 5), 2), kiln.ShapeError,
     r"fold: expected input \[N, C \* kH \* kW, L\] or one sample \[C \* kH \* kW, L\]"),
    (lambda: fold(mint.ones(2, 12, 12), (4, 5, 6), 2), kiln.KilnValueError,
     r"fold: expected output_size to be an int or a sequence of two ints, got 3 sizes"),
    (lambda: Unfold(2, dilation=0), kiln.KilnValueError, r"Unfold: expected dilation >= 1"),
    (lambda: Fold((4, -1), 2), kiln.KilnValueError, r"Fold: expected output_size >= 0"),
], ids=["kernel-0", "padding-negative", "stride-0", "three-sizes", "float-kernel",
        "float-in-pair", "not-a-tensor", "rank", "empty-channels", "no-block", "divisible",
        "blocks", "output-too-small", "fold-rank", "output-size-three", "cell-dilation",
        "cell-output-size"])
def test_unfold_and_fold_refuse_bad_arguments(call, error, match):
    with raises(error, match=match):
        call()


@pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64])
@pytest.mark.parametrize("size, kwargs", GEOMETRIES, ids=GEOMETRY_IDS)
def test_unfold_and_fold_match_torch(torch, size, kwargs, dtype, batched, rng):
    shape = ((2, 3) if batched else (3,)) + size
    x = rng.standard_normal(shape)
    tx = torch.tensor(x, dtype=getattr(torch, dtype.name), requires_grad=True)
    want = torch.nn.functional.unfold(tx, **kwargs)
    ours_x = t(x, dtype).requires_grad_()
    cols = unfold(ours_x, **kwargs)
    check_torch(cols, want, dtype, "unfold")
    upstream = rng.standard_normal(tuple(want.shape))
    (grad,) = kiln.autograd.grad(cols, [ours_x], t(upstream, dtype))
    check_torch(grad, torch.autograd.grad(want, [tx], torch.tensor(upstream).to(want.dtype))[0],
                dtype, "unfold's gradient")
    c = torch.tensor(upstream, dtype=getattr(torch, dtype.name), requires_grad=True)
    want = torch.nn.functional.fold(c, size, **kwargs)
    ours_c = t(upstream, dtype).requires_grad_()
    image = fold(ours_c, size, **kwargs)
    check_torch(image, want, dtype, "fold")
    (grad,) = kiln.autograd.grad(image, [ours_c], t(x, dtype))
    check_torch(grad, torch.autograd.grad(want, [c], torch.tensor(x).to(want.dtype))[0], dtype,
                "fold's gradient")


def test_unfold_and_fold_cells_repr_as_torch(torch):
    for args, kwargs in [((3,), {}), (((2, 3),), dict(dilation=2, padding=(1, 0), stride=2))]:
        assert repr(Unfold(*args, **kwargs)) == repr(torch.nn.Unfold(*args, **kwargs))
        assert repr(Fold((8, 9), *args, **kwargs)) == repr(torch.nn.Fold((8, 9), *args, **kwargs))


# ------------------------------------------------------------------------------------------------
# embedding_bag / EmbeddingBag


def bags_numpy(indices, weight, offsets=None, mode="mean", per_sample_weights=None,
               include_last_offset=False, padding_idx=None):
    """PyTorch's embedding_bag in NumPy, one bag at a time."""
    if indices.ndim == 2:
        size = indices.shape[1]
        ranges = [(b * size, b * size + size) for b in range(indices.shape[0])]
    else:
        starts = list(offsets[:-1] if include_last_offset else offsets)
        ends = list(offsets[1:]) if include_last_offset else starts[1:] + [indices.size]
        ranges = list(zip(starts, ends))
    flat = indices.reshape(-1)
    scale = (np.ones(flat.shape) if per_sample_weights is None
             else per_sample_weights.reshape(-1))
    if padding_idx is not None:
        padding_idx %= weight.shape[0]
    out = np.zeros((len(ranges), weight.shape[1]), weight.dtype)
    for b, (low, high) in enumerate(ranges):
        kept = [i for i in range(low, high) if flat[i] != padding_idx]
        if not kept:
            continue
        rows = weight[flat[kept]] * scale[kept, None]
        out[b] = {"sum": rows.sum, "mean": rows.mean, "max": rows.max}[mode](0)
    return out


# (indices, offsets, kwargs): fixed-length bags; bags cut at offsets, one empty and the last
# running to the end; CSR offsets; padding (negative), a bag of padding only among them.
BAGS = [
    (np.array([[1, 2, 0], [4, 4, 3]]), None, {}),
    (np.array([1, 2, 0, 4, 5, 0, 2]), np.array([0, 2, 2, 5]), {}),
    (np.array([3, 1, 2, 5, 5, 0]), np.array([0, 1, 4, 6]), dict(include_last_offset=True)),
    (np.array([1, 5, 5, 0, 3, 5]), np.array([0, 3, 4]), dict(padding_idx=-1)),
]
BAG_IDS = ["fixed-length", "offsets", "include-last-offset", "padding"]
MODES = ["sum", "mean", "max"]


def call_bags(indices, weight, offsets, **kwargs):
    return embedding_bag(t(indices), weight, None if offsets is None else t(offsets), **kwargs)


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("indices, offsets, kwargs", BAGS, ids=BAG_IDS)
def test_embedding_bag_matches_numpy(indices, offsets, kwargs, mode, dtype, rng):
    weight = rng.standard_normal((6, 4)).astype(dtype.name)
    out = call_bags(indices, t(weight), offsets, mode=mode, **kwargs)
    assert out.dtype == dtype
    assert_close(out, bags_numpy(indices, weight, offsets, mode, **kwargs))


def test_embedding_bag_per_sample_weights_and_int32_indices(rng):
    weight = rng.standard_normal((6, 3))
    indices, offsets = np.array([1, 2, 0, 4, 5, 0, 2]), np.array([0, 2, 2, 5])
    scale = rng.standard_normal(indices.shape)
    out = embedding_bag(t(indices, kiln.int32), t(weight), t(offsets, kiln.int32), mode="sum",
                        per_sample_weights=t(scale), padding_idx=0)
    close(out, bags_numpy(indices, weight, offsets, "sum", scale, padding_idx=0), 1e-12, 1e-12)


def test_embedding_bag_empty_input_gives_zero_bags():
    weight = mint.ones(4, 2).requires_grad_()
    out = embedding_bag(t(np.zeros(0, np.int64)), weight, t(np.array([0, 0])), mode="max")
    np.testing.assert_array_equal(out.detach().numpy(), np.zeros((2, 2)))
    out.sum().backward()  # all bags empty: still a (zero) gradient for the table, as PyTorch's
    np.testing.assert_array_equal(weight.grad.numpy(), np.zeros((4, 2)))
    assert embedding_bag(t(np.zeros((3, 0), np.int64)), weight).shape == (3, 2)
    assert embedding_bag(t(np.array([1, 2])), weight, t(np.zeros(0, np.int64))).shape == (0, 2)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("indices, offsets, kwargs", BAGS, ids=BAG_IDS)
def test_embedding_bag_gradients_match_finite_differences(indices, offsets, kwargs, mode, rng):
    weight = t(rng.standard_normal((6, 3))).requires_grad_()
    kiln.testing.gradcheck(lambda w: call_bags(indices, w, offsets, mode=mode, **kwargs),
                           (weight,))


def test_embedding_bag_per_sample_weights_gradient(rng):
    indices, offsets = np.array([1, 2, 0, 4, 5, 0, 2]), np.array([0, 2, 2, 5])
    weight = t(rng.standard_normal((6, 3))).requires_grad_()
    scale = t(rng.standard_normal(indices.shape)).requires_grad_()
    kiln.testing.gradcheck(lambda w, s: embedding_bag(t(indices), w, t(offsets), mode="sum",
                                                      per_sample_weights=s), (weight, scale))


def test_embedding_bag_padding_row_and_scale_grad_by_freq_gradients(rng):
    weight = t(rng.standard_normal((5, 2))).requires_grad_()
    out = embedding_bag(t(np.array([3, 3, 1, 3, 2])), weight, t(np.array([0, 2])), mode="sum",
                        scale_grad_by_freq=True, padding_idx=1)
    (grad,) = kiln.autograd.grad(mint.sum(out), [weight])
    # Index 3 is looked up three times, each lookup's gradient divided by 3; padding gets none.
    np.testing.assert_allclose(grad.numpy(), [[0, 0], [0, 0], [1, 1], [1, 1], [0, 0]])


def test_embedding_bag_max_norm_renorms_the_rows_looked_up(rng):
    table = rng.standard_normal((5, 3)) * 3
    weight = t(table)
    embedding_bag(t(np.array([[0, 2]])), weight, max_norm=1.0, mode="sum")
    norms = np.linalg.norm(weight.numpy(), axis=1)
    assert np.all(norms[[0, 2]] <= 1.0 + 1e-6)
    np.testing.assert_array_equal(weight.numpy()[[1, 3, 4]], table[[1, 3, 4]])


@pytest.mark.parametrize("mode", MODES)
def test_embedding_bag_under_jit_equals_eager(mode, rng):
    weight = t(rng.standard_normal((6, 3)))
    scale = t(rng.standard_normal(3))

    def loss(w, i, o):
        return mint.sum(embedding_bag(i, w, o, mode=mode, padding_idx=0) * scale)

    for indices, offsets in [([1, 2, 0, 4, 5, 0, 2], [0, 2, 2, 5]), ([3, 0, 1], [0, 1, 1, 3])]:
        i, o = t(np.array(indices)), t(np.array(offsets))
        close(kiln.jit(loss)(weight, i, o), loss(weight, i, o).numpy(), 1e-12, 1e-12)
        close(kiln.jit(kiln.grad(loss))(weight, i, o), kiln.grad(loss)(weight, i, o).numpy(),
              1e-12, 1e-12)


def test_embedding_bag_cell(rng):
    bag = EmbeddingBag(6, 3, mode="sum", padding_idx=-2, dtype=kiln.float64)
    assert repr(bag) == "EmbeddingBag(6, 3, mode='sum', padding_idx=4)"
    assert list(bag.state_dict()) == ["weight"] and bag.weight.dtype == kiln.float64
    np.testing.assert_array_equal(bag.weight.numpy()[4], np.zeros(3))
    indices, offsets = np.array([1, 4, 0, 2]), np.array([0, 1])
    scale = rng.standard_normal(4)
    close(bag(t(indices), t(offsets), t(scale)),
          bags_numpy(indices, bag.weight.numpy(), offsets, "sum", scale, padding_idx=4), 0, 0)
    assert repr(EmbeddingBag(4, 2, max_norm=1, norm_type=1, scale_grad_by_freq=True)) == (
        "EmbeddingBag(4, 2, max_norm=1.0, norm_type=1.0, scale_grad_by_freq=True, mode='mean')")
    csr = EmbeddingBag(6, 3, mode="max", include_last_offset=True)
    close(csr(t(indices), t(np.array([0, 1, 4]))),
          bags_numpy(indices, csr.weight.detach().numpy(), np.array([0, 1, 4]), "max",
                     include_last_offset=True), 0, 0)


def test_embedding_bag_from_pretrained():
    table = t(np.array([[1.0, 2.3], [4.0, 5.1]]))
    bag = EmbeddingBag.from_pretrained(table)
    assert not bag.weight.requires_grad
    close(bag(t(np.array([[1, 0]]))), [[2.5, 3.7]], 1e-12, 1e-12)
    trained = EmbeddingBag.from_pretrained(table, freeze=False, mode="max", padding_idx=1)
    assert trained.weight.requires_grad and trained.mode == "max"
    close(trained(t(np.array([[1, 0]]))), [[1.0, 2.3]], 0, 0)  # the padding row keeps its values


@pytest.mark.parametrize("call, error, match", [
    (lambda: embedding_bag(t([[1]]), mint.ones(3, 2), mode="min"), kiln.KilnValueError,
     r"embedding_bag: expected mode 'sum', 'mean' or 'max', got 'min'"),
    (lambda: embedding_bag(t([[1]]), mint.ones(3, 2), mode="max", scale_grad_by_freq=True),
     kiln.KilnValueError, r"embedding_bag: mode 'max' does not support scale_grad_by_freq=True"),
    (lambda: embedding_bag(t([[1]]), mint.ones(3, 2), per_sample_weights=mint.ones(1, 1)),
     kiln.KilnNotImplementedError,
     r"embedding_bag: per_sample_weights is only supported with mode 'sum', got mode 'mean'"),
    (lambda: embedding_bag(t([[1]]), mint.ones(3, 2), mode="sum",
                           per_sample_weights=mint.ones(1)), kiln.ShapeError,
     r"embedding_bag: expected per_sample_weights of the input's shape \[1, 1\], got \[1\]"),
    (lambda: embedding_bag(t([[1]]), mint.ones(3, 2), mode="sum",
                           per_sample_weights=mint.ones(1, 1, dtype=kiln.float64)),
     kiln.DTypeError, r"embedding_bag: expected per_sample_weights of dtype float32 \(the "
                      r"weight's\), got float64"),
    (lambda: embedding_bag(t([[1]]), mint.ones(3, 2), t([0])), kiln.KilnValueError,
     r"embedding_bag: a 2-d input \[B, N\] is B bags of N indices; expected offsets None"),
    (lambda: embedding_bag(t([1]), mint.ones(3, 2)), kiln.KilnValueError,
     r"embedding_bag: a 1-d input needs offsets"),
    (lambda: embedding_bag(t([1]), mint.ones(3, 2), t([[0]])), kiln.ShapeError,
     r"embedding_bag: expected 1-d offsets, got \[1, 1\]"),
    (lambda: embedding_bag(t([[[1]]]), mint.ones(3, 2)), kiln.ShapeError,
     r"embedding_bag: expected input \[B, N\] \(bags of N indices\) or \[n\] with offsets, got "
     r"\[1, 1, 1\]"),
    (lambda: embedding_bag(t([1.0]), mint.ones(3, 2), t([0])), kiln.DTypeError,
     r"embedding_bag: expected input of dtype int64 or int32, got float64"),
    (lambda: embedding_bag(t([1]), mint.ones(3), t([0])), kiln.ShapeError,
     r"embedding_bag: expected weight \[num_embeddings, embedding_dim\], got \[3\]"),
    (lambda: embedding_bag(t([1, 2]), mint.ones(3, 2), t([1])), kiln.KilnValueError,
     r"embedding_bag: expected offsets\[0\] to be 0 .*, got 1"),
    (lambda: embedding_bag(t([1, 2]), mint.ones(3, 2), t([0, 3])), kiln.KilnValueError,
     r"embedding_bag: expected offsets\[-1\] to be at most the input's length 2, got 3"),
    (lambda: embedding_bag(t([1, 2]), mint.ones(3, 2), t([0, 2, 1])), kiln.KilnValueError,
     r"embedding_bag: expected non-decreasing offsets .*, got \[0, 2, 1\]"),
    (lambda: embedding_bag(t([1]), mint.ones(3, 2), t(np.zeros(0, np.int64)),
                           include_last_offset=True), kiln.KilnValueError,
     r"embedding_bag: include_last_offset=True needs at least one offset"),
    (lambda: embedding_bag(t([[1]]), mint.ones(3, 2), sparse=True),
     kiln.KilnNotImplementedError, r"embedding_bag: sparse is not supported"),
    (lambda: embedding_bag(t([[1]]), mint.ones(3, 2), padding_idx=3), kiln.KilnValueError,
     r"embedding_bag: padding_idx must be in \[-3, 2\], got 3"),
    (lambda: EmbeddingBag(3, 2, mode="max", scale_grad_by_freq=True), kiln.KilnValueError,
     r"EmbeddingBag: mode 'max' does not support scale_grad_by_freq=True"),
    (lambda: EmbeddingBag(3, 2, sparse=True), kiln.KilnNotImplementedError,
     r"EmbeddingBag: sparse is not supported"),
    (lambda: EmbeddingBag(3, 2, _weight=mint.ones(2, 2)), kiln.ShapeError,
     r"EmbeddingBag: expected _weight of shape \[num_embeddings, embedding_dim\] = \[3, 2\], got "
     r"\[2, 2\]"),
    (lambda: EmbeddingBag.from_pretrained(mint.ones(3)), kiln.ShapeError,
     r"EmbeddingBag.from_pretrained: expected 2-d embeddings"),
], ids=["mode", "max-scale-grad", "weights-mean", "weights-shape", "weights-dtype",
        "2d-offsets", "1d-no-offsets", "2d-offsets-tensor", "3d-input", "float-input",
        "1d-weight", "first-offset", "last-offset", "decreasing", "last-offset-empty", "sparse",
        "padding-range", "cell-max-scale-grad", "cell-sparse", "cell-weight-shape",
        "pretrained-rank"])
def test_embedding_bag_refuses_bad_arguments(call, error, match):
    with raises(error, match=match):
        call()


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("indices, offsets, kwargs", BAGS, ids=BAG_IDS)
def test_embedding_bag_matches_torch(torch, indices, offsets, kwargs, mode, dtype, rng):
    table = rng.standard_normal((6, 4))
    weight = t(table, dtype).requires_grad_()
    theirs = torch.tensor(table, dtype=getattr(torch, dtype.name), requires_grad=True)
    out = call_bags(indices, weight, offsets, mode=mode, **kwargs)
    want = torch.nn.functional.embedding_bag(
        torch.tensor(indices), theirs, None if offsets is None else torch.tensor(offsets),
        mode=mode, **kwargs)
    check_torch(out, want, dtype, "value")
    upstream = rng.standard_normal(tuple(want.shape))
    (grad,) = kiln.autograd.grad(out, [weight], t(upstream, dtype))
    (expected,) = torch.autograd.grad(want, [theirs], torch.tensor(upstream).to(want.dtype))
    check_torch(grad, expected, dtype, "gradient of weight")


def test_embedding_bag_per_sample_weights_and_scale_grad_match_torch(torch, rng):
    indices, offsets = np.array([1, 2, 1, 4, 5, 0, 1]), np.array([0, 2, 2, 5])
    scale, table = rng.standard_normal(indices.shape), rng.standard_normal((6, 3))
    ours = [t(table).requires_grad_(), t(scale).requires_grad_()]
    theirs = [torch.tensor(table, requires_grad=True), torch.tensor(scale, requires_grad=True)]
    out = embedding_bag(t(indices), ours[0], t(offsets), mode="sum", per_sample_weights=ours[1],
                        scale_grad_by_freq=True, padding_idx=0)
    want = torch.nn.functional.embedding_bag(
        torch.tensor(indices), theirs[0], torch.tensor(offsets), mode="sum",
        per_sample_weights=theirs[1], scale_grad_by_freq=True, padding_idx=0)
    check_torch(out, want, kiln.float64, "value")
    upstream = rng.standard_normal(tuple(want.shape))
    grads = kiln.autograd.grad(out, ours, t(upstream))
    wants = torch.autograd.grad(want, theirs, torch.tensor(upstream))
    for name, grad, expected in zip(["weight", "per_sample_weights"], grads, wants):
        check_torch(grad, expected, kiln.float64, f"gradient of {name}")


def test_embedding_bag_cell_matches_torch(torch, rng):
    kwargs = dict(max_norm=1.5, mode="mean", padding_idx=2, include_last_offset=True)
    theirs = torch.nn.EmbeddingBag(7, 3, dtype=torch.float64, **kwargs)
    ours = nn.embedding.EmbeddingBag(7, 3, dtype=kiln.float64, **kwargs)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict({"weight": theirs.weight.detach().numpy()})
    indices, offsets = np.array([1, 2, 6, 2, 5, 0, 2]), np.array([0, 3, 3, 7])
    out = ours(t(indices), t(offsets))
    want = theirs(torch.tensor(indices), torch.tensor(offsets))
    check_torch(out, want, kiln.float64, "value")
    check_torch(ours.weight.detach(), theirs.weight, kiln.float64, "renormed weight")
    mint.sum(out).backward()
    want.sum().backward()
    check_torch(ours.weight.grad, theirs.weight.grad, kiln.float64, "gradient of weight")
