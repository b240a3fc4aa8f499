"""F.pad's negative pads in the copying modes ("reflect", "replicate", "circular"), which crop as
PyTorch's do (Note [Negative pads] in kiln/nn/functional.py), and its ``value`` rule; checked
against a NumPy model of PyTorch's index maps, its gradient as their adjoint, and PyTorch."""

import numpy as np
import pytest

import kiln
import kiln.nn as nn
import kiln.nn.functional as F
from conftest import assert_close, random_array, raises, t

MODES = ["reflect", "replicate", "circular"]


def _positions(size, before, after, mode):
    """For one dimension of ``size`` padded by (before, after): the input position each output
    position copies, as PyTorch's kernels choose it. Reflect and replicate map an output position
    to a position of the whole input (a crop on one side does not change what the other side
    mirrors); circular wraps around what the crops leave."""
    out = np.arange(size + before + after)
    if mode == "reflect":
        index = out - before
        index = np.where(index < 0, -index, index)
        return np.where(index >= size, 2 * (size - 1) - index, index)
    if mode == "replicate":
        return np.clip(out - before, 0, size - 1)
    start, stop = max(-before, 0), size - max(-after, 0)
    return start + (out - max(before, 0)) % (stop - start)


def numpy_pad(array, pads, mode):
    """``array`` padded by PyTorch's ``pads`` (pairs from the last dimension backwards)."""
    positions = []
    for dim in range(array.ndim):
        k = array.ndim - 1 - dim
        before, after = (pads[2 * k], pads[2 * k + 1]) if 2 * k < len(pads) else (0, 0)
        positions.append(_positions(array.shape[dim], before, after, mode))
    return array[np.ix_(*positions)]


def numpy_pad_gradient(shape, pads, mode, upstream):
    """The gradient of sum(pad(x) * upstream) in x: each output's upstream value added at the
    input position it copies (the adjoint of the index map)."""
    positions = [np.arange(n) for n in shape]
    for dim in range(len(shape)):
        k = len(shape) - 1 - dim
        if 2 * k < len(pads):
            positions[dim] = _positions(shape[dim], pads[2 * k], pads[2 * k + 1], mode)
    grad = np.zeros(shape)
    np.add.at(grad, np.ix_(*positions), upstream)
    return grad


# (shape, pads, modes): mixed signs, crops on both sides, crops past the other side's pad, a
# crop to an empty dimension, and several dimensions at once.
CASES = [
    ((2, 3, 6), (-2, 3), MODES),
    ((2, 3, 6), (1, -4), MODES),
    ((2, 3, 6), (-1, -2), MODES),
    ((2, 3, 6), (-3, -3), MODES),
    ((1, 2, 4), (-5, 3), ["reflect", "replicate"]),
    ((2, 2, 5, 6), (-1, 2, 3, -2), MODES),
    ((2, 2, 5, 6), (0, -1, -2, 0), MODES),
    ((1, 2, 3, 4, 5), (2, -1, -1, 1, 1, -2), MODES),
]
CASE_PARAMS = [pytest.param(shape, pads, mode, id=f"{mode}-{shape}-{pads}")
               for shape, pads, modes in CASES for mode in modes]


@pytest.mark.parametrize("shape, pads, mode", CASE_PARAMS)
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.int32, kiln.bool_])
def test_negative_pads_crop_as_the_index_maps_say(shape, pads, mode, dtype, rng):
    a = random_array(shape, dtype, rng)
    out = F.pad(t(a, dtype), pads, mode)
    assert out.dtype == dtype
    assert_close(out, numpy_pad(a, pads, mode))


@pytest.mark.parametrize("shape, pads, mode", CASE_PARAMS)
def test_gradients_through_cropping_are_the_adjoint(shape, pads, mode, rng):
    x = t(rng.standard_normal(shape)).requires_grad_()
    out = F.pad(x, pads, mode)
    upstream = rng.standard_normal(tuple(out.shape))
    (grad,) = kiln.autograd.grad(out, [x], t(upstream))
    np.testing.assert_allclose(grad.numpy(), numpy_pad_gradient(shape, pads, mode, upstream),
                               rtol=1e-12, atol=1e-12)
    # .backward() reaches the leaf the same way.
    (F.pad(x, pads, mode) * t(upstream)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), grad.numpy(), rtol=1e-12, atol=1e-12)


def test_crops_under_jit_match_eager(rng):
    x = t(rng.standard_normal((2, 3, 5, 6)))
    step = kiln.jit(lambda v: F.pad(v, (-2, 3, 1, -1), "reflect") * 2)
    for _ in range(2):
        assert_close(step(x), numpy_pad(x.numpy(), (-2, 3, 1, -1), "reflect") * 2)
    grad = kiln.jit(kiln.grad(lambda v: (F.pad(v, (2, -3), "circular") ** 2).sum()))
    np.testing.assert_allclose(
        grad(x).numpy(), numpy_pad_gradient(x.shape, (2, -3), "circular",
                                            2 * numpy_pad(x.numpy(), (2, -3), "circular")),
        rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape, pads, mode", CASE_PARAMS)
def test_values_and_gradients_match_torch(torch, shape, pads, mode, rng):
    if mode != "circular" and 0 in [n + pads[2 * k] + pads[2 * k + 1] for k, n in
                                    enumerate(reversed(shape[-len(pads) // 2:]))]:
        pytest.skip("PyTorch's reflect and replicate refuse an empty result")
    v = rng.standard_normal(shape)
    x, tx = t(v).requires_grad_(), torch.tensor(v, requires_grad=True)
    out, want = F.pad(x, pads, mode), torch.nn.functional.pad(tx, pads, mode)
    np.testing.assert_array_equal(out.detach().numpy(), want.detach().numpy())
    upstream = rng.standard_normal(tuple(want.shape))
    (grad,) = kiln.autograd.grad(out, [x], t(upstream))
    (grad_want,) = torch.autograd.grad(want, [tx], torch.tensor(upstream))
    np.testing.assert_allclose(grad.numpy(), grad_want.numpy(), rtol=1e-12, atol=1e-12)


def test_padding_cells_crop_as_pytorchs(torch, rng):
    v = rng.standard_normal((2, 3, 5, 6))
    for ours, theirs in ((nn.ReflectionPad2d((-1, 2, 3, -2)),
                          torch.nn.ReflectionPad2d((-1, 2, 3, -2))),
                         (nn.ReplicationPad1d((2, -3)), torch.nn.ReplicationPad1d((2, -3))),
                         (nn.CircularPad2d((-2, 1, 0, -1)),
                          torch.nn.CircularPad2d((-2, 1, 0, -1)))):
        x = v[0] if isinstance(ours, nn.ReplicationPad1d) else v
        np.testing.assert_array_equal(ours(t(x)).numpy(), theirs(torch.tensor(x)).numpy())


def test_value_is_refused_in_the_copying_modes_as_in_pytorch(torch):
    x = t(np.arange(8.0).reshape(2, 4))
    for mode in MODES:
        with raises(kiln.KilnValueError, match=f'pad: padding mode "{mode}" doesn\'t take in '
                                               f'value argument .*got value=1.5'):
            F.pad(x, (1, 1), mode, 1.5)
        with pytest.raises(RuntimeError, match=f'Padding mode "{mode}" doesn\'t take in value'):
            torch.nn.functional.pad(torch.zeros(2, 4), (1, 1), mode, 1.5)
        # None and 0 are accepted, as PyTorch accepts them.
        for value in (None, 0, 0.0):
            np.testing.assert_array_equal(
                F.pad(x, (1, -1), mode, value).numpy(),
                torch.nn.functional.pad(torch.tensor(x.numpy()), (1, -1), mode, value).numpy())
    # Constant mode fills with the value and crops as before.
    assert_close(F.pad(x, (-1, 2), "constant", 1.5),
                 np.pad(x.numpy()[:, 1:], ((0, 0), (0, 2)), constant_values=1.5))


@pytest.mark.parametrize("pads, mode, error, match", [
    ((-3, -2), "reflect", kiln.ShapeError,
     r"pad: padding \(-3, -2\) of dimension 2 of size 4 gives a negative size -1"),
    ((-5, 0), "replicate", kiln.ShapeError, r"gives a negative size -1"),
    ((-2, 3), "circular", kiln.ShapeError,
     r"pad: circular padding \(-2, 3\) of dimension 2 of size 4 wraps more than once around "
     r"what the crop leaves \(2\): expected each positive pad at most 2"),
    ((-5, 3), "circular", kiln.ShapeError,
     r"pad: padding \(-5, 3\) crops dimension 2 of size 4 by more than its size"),
    ((-1, 4), "reflect", kiln.KilnValueError,
     r"reflect padding must be less than the dimension size"),
    ((-1, 1, 0), "reflect", kiln.KilnValueError, r"odd number of pads"),
    ((-1, 1) * 4, "replicate", kiln.KilnValueError, r"at most 6 pads for a 3-d tensor"),
    ((-1, 1), "symmetric", kiln.KilnValueError, r"got 'symmetric'"),
])
def test_bad_crops_are_typed_errors(pads, mode, error, match):
    with raises(error, match=match):
        F.pad(t(np.zeros((2, 3, 4))), pads, mode)


def test_non_tensor_input_is_a_type_error():
    with raises(kiln.KilnTypeError, match="pad: expected input to be a kiln.Tensor"):
        F.pad(np.zeros((2, 3)), (-1, 1), "reflect")
