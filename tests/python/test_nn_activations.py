"""kiln.mint's composite activations (leaky_relu, elu, softplus, hardtanh; kiln/mint/_composite.py)
and kiln.nn's LeakyReLU, ELU, Softplus and Hardtanh against PyTorch's: values and gradients in
every floating dtype, at 0, NaN, the ends of hardtanh's range and softplus's threshold and large
|x|, under kiln.jit, and their argument errors."""

import numpy as np
import pytest

import kiln
from conftest import FLOAT_DTYPES, check_torch, raises, random_array, t, torch_twin
from kiln import nn
from kiln.mint import _composite
from kiln.nn.activation import ELU, Hardtanh, LeakyReLU, Softplus

mint = kiln.mint






# (kiln function, kwargs, torch.nn.functional's name): each case at its own parameters.
CASES = {
    "leaky_relu": (_composite.leaky_relu, {}, "leaky_relu"),
    "leaky_relu-0.2": (_composite.leaky_relu, {"negative_slope": 0.2}, "leaky_relu"),
    "leaky_relu-steep": (_composite.leaky_relu, {"negative_slope": -1.5}, "leaky_relu"),
    "elu": (_composite.elu, {}, "elu"),
    "elu-0.5": (_composite.elu, {"alpha": 0.5}, "elu"),
    "softplus": (_composite.softplus, {}, "softplus"),
    "softplus-beta2": (_composite.softplus, {"beta": 2.0, "threshold": 5.0}, "softplus"),
    "softplus-beta0.5": (_composite.softplus, {"beta": 0.5, "threshold": 30}, "softplus"),
    "softplus-negative-beta": (_composite.softplus, {"beta": -1.0}, "softplus"),
    "hardtanh": (_composite.hardtanh, {}, "hardtanh"),
    "hardtanh-0-6": (_composite.hardtanh, {"min_val": 0.0, "max_val": 6.0}, "hardtanh"),
    "hardtanh-point": (_composite.hardtanh, {"min_val": 0.5, "max_val": 0.5}, "hardtanh"),
}

# Exactly 0, hardtanh's ends, softplus's thresholds (20, 5 / 2, 30 / 0.5) and both sides of them,
# values where exp overflows float32 and float16, and NaN.
EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, 6.0, 20.0, 19.5, 20.5, 2.5, 2.4, 2.6, 60.0, 59.0, 61.0, -20.0,
         -30.0, 12.0, 100.0, -100.0, 1e4, -1e4, np.nan]


def inputs(dtype, rng):
    """Random values in [-8, 8] and EDGES, representable in ``dtype``."""
    values = np.concatenate([random_array(40, dtype, rng, -8.0, 8.0).astype(np.float64), EDGES])
    return t(values, kiln.float64).to(dtype).numpy().astype(np.float64)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("case", CASES)
def test_activation_matches_torch(torch, case, dtype, rng):
    fn, kwargs, torch_name = CASES[case]
    values = inputs(dtype, rng)
    x = t(values, kiln.float64).to(dtype).requires_grad_()
    tx = torch_twin(torch, values, dtype)
    out = fn(x, **kwargs)
    expected = getattr(torch.nn.functional, torch_name)(tx, **kwargs)
    assert out.dtype == dtype and out.shape == tuple(expected.shape)
    check_torch(out, expected, dtype, "value")
    upstream = random_array(values.shape, dtype, rng, 0.5, 2.0)
    (grad,) = kiln.autograd.grad(out, x, t(upstream, dtype))
    (want,) = torch.autograd.grad(expected, tx, torch_twin(torch, upstream, dtype))
    assert grad.dtype == dtype
    check_torch(grad, want, dtype, "gradient")


@pytest.mark.parametrize("fn, kwargs, gradients", [
    (_composite.leaky_relu, {"negative_slope": 0.1}, [0.1, 1.0, 0.1]),
    (_composite.elu, {"alpha": 0.5}, [0.5, 1.0, 1.0]),
    (_composite.hardtanh, {}, [1.0, 1.0, 1.0]),
    (_composite.softplus, {}, [0.5, 0.5 + 0.25 * 1e-3, np.nan]),
], ids=["leaky_relu", "elu", "hardtanh", "softplus"])
def test_gradients_at_zero_and_nan_are_pytorchs(fn, kwargs, gradients):
    # x = 0 takes the negative side's slope where PyTorch's kernels test x > 0 (elu: x <= 0), and
    # NaN the side their comparison leaves it on.
    x = t([0.0, 1e-3, np.nan], kiln.float64).requires_grad_()
    out = fn(x, **kwargs)
    (grad,) = kiln.autograd.grad(mint.sum(out), x)
    np.testing.assert_allclose(grad.numpy(), gradients, rtol=1e-6)
    assert np.isnan(out.numpy()[2])


def test_hardtanh_gradient_is_zero_at_the_ends_of_its_range():
    # clamp's gradient is 1 at a bound; PyTorch's hardtanh_backward tests min < x < max.
    x = t([-1.0, -0.999, 0.999, 1.0], kiln.float32).requires_grad_()
    (grad,) = kiln.autograd.grad(mint.sum(_composite.hardtanh(x)), x)
    np.testing.assert_array_equal(grad.numpy(), [0.0, 1.0, 1.0, 0.0])


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float16, kiln.bfloat16],
                         ids=lambda d: d.name)
def test_softplus_of_large_inputs_is_finite_with_finite_gradients(dtype):
    # exp(beta * x) overflows past about 88 in float32 (11 in float16): the linear piece takes
    # over at the threshold, and the curve's unused branch never sees the large x.
    x = t([-1e4, -90.0, 15.0, 19.0, 25.0, 90.0, 1e4], kiln.float64).to(dtype).requires_grad_()
    out = _composite.softplus(x)
    (grad,) = kiln.autograd.grad(mint.sum(out), x)
    values, grads = out.numpy().astype(np.float64), grad.numpy().astype(np.float64)
    assert np.isfinite(values).all() and np.isfinite(grads).all()
    np.testing.assert_array_equal(values[4:], x.numpy()[4:])  # x itself past the threshold
    np.testing.assert_allclose(grads, [0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0], atol=1e-6)


@pytest.mark.parametrize("case", ["leaky_relu-0.2", "elu-0.5", "softplus-beta2", "hardtanh-0-6"])
def test_activations_under_jit_match_eager(case, rng):
    fn, kwargs, _ = CASES[case]
    x = t(inputs(kiln.float32, rng), kiln.float32)
    eager_value = fn(x, **kwargs)
    eager_grad = kiln.grad(lambda v: mint.sum(fn(v, **kwargs)))(x)
    jitted = kiln.jit(lambda v: fn(v, **kwargs))
    jitted_grad = kiln.jit(kiln.grad(lambda v: mint.sum(fn(v, **kwargs))))
    for _ in range(2):  # the trace, then the compiled graph
        np.testing.assert_allclose(jitted(x).numpy(), eager_value.numpy(), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(jitted_grad(x).numpy(), eager_grad.numpy(), rtol=1e-6,
                                   atol=1e-7)


@pytest.mark.parametrize("cell, fn, kwargs, text", [
    (LeakyReLU(), _composite.leaky_relu, {}, "LeakyReLU(negative_slope=0.01)"),
    (LeakyReLU(0.2), _composite.leaky_relu, {"negative_slope": 0.2},
     "LeakyReLU(negative_slope=0.2)"),
    (ELU(), _composite.elu, {}, "ELU(alpha=1.0)"),
    (ELU(alpha=2), _composite.elu, {"alpha": 2.0}, "ELU(alpha=2.0)"),
    (Softplus(), _composite.softplus, {}, "Softplus(beta=1.0, threshold=20.0)"),
    (Softplus(2, 5), _composite.softplus, {"beta": 2.0, "threshold": 5.0},
     "Softplus(beta=2.0, threshold=5.0)"),
    (Hardtanh(), _composite.hardtanh, {}, "Hardtanh(min_val=-1.0, max_val=1.0)"),
    (Hardtanh(0, 6), _composite.hardtanh, {"min_val": 0.0, "max_val": 6.0},
     "Hardtanh(min_val=0.0, max_val=6.0)"),
], ids=repr)
def test_activation_cells_apply_their_function_and_print_as_pytorch(torch, cell, fn, kwargs,
                                                                    text, rng):
    assert repr(cell) == text
    torch_name = text.split("(")[0]
    assert repr(getattr(torch.nn, torch_name)(**kwargs)) == text
    x = t(random_array((2, 3, 4), kiln.float32, rng, -5.0, 5.0))
    np.testing.assert_array_equal(cell(x).numpy(), fn(x, **kwargs).numpy())
    jitted = kiln.jit(cell)
    np.testing.assert_allclose(jitted(x).numpy(), fn(x, **kwargs).numpy(), rtol=1e-6, atol=1e-7)
    assert list(cell.parameters()) == []


@pytest.mark.parametrize("name, cls", [("leakyrelu", LeakyReLU), ("elu", ELU),
                                       ("softplus", Softplus), ("hardtanh", Hardtanh)])
def test_dense_takes_the_new_activations_by_name(name, cls, rng):
    dense = nn.Dense(4, 3, activation=name)
    assert isinstance(dense.activation, cls)
    x = t(random_array((2, 4), kiln.float32, rng))
    y = mint.linear(x, dense.weight, dense.bias)
    np.testing.assert_allclose(dense(x).numpy(), cls()(y).numpy(), rtol=1e-6)


@pytest.mark.parametrize("call, error, message", [
    (lambda x: _composite.leaky_relu(t([1, 2])), kiln.DTypeError,
     "leaky_relu: expected a floating-point input, got int64"),
    (lambda x: _composite.elu(t([True])), kiln.DTypeError,
     "elu: expected a floating-point input, got bool"),
    (lambda x: _composite.softplus([1.0, 2.0]), kiln.KilnTypeError,
     "softplus: expected input to be a kiln.Tensor, got list"),
    (lambda x: _composite.hardtanh(2.0), kiln.KilnTypeError,
     "hardtanh: expected input to be a kiln.Tensor, got float"),
    (lambda x: _composite.leaky_relu(x, "0.1"), kiln.KilnTypeError,
     "leaky_relu: expected negative_slope to be a real number, got str '0.1'"),
    (lambda x: _composite.elu(x, alpha=x), kiln.KilnTypeError,
     "elu: expected alpha to be a real number, got Tensor"),
    (lambda x: _composite.softplus(x, beta=True), kiln.KilnTypeError,
     "softplus: expected beta to be a real number, got bool True"),
    (lambda x: _composite.softplus(x, threshold=None), kiln.KilnTypeError,
     "softplus: expected threshold to be a real number, got NoneType None"),
    (lambda x: _composite.hardtanh(x, 1.0, -1.0), kiln.KilnValueError,
     "hardtanh: expected min_val <= max_val, got min_val=1.0 and max_val=-1.0"),
    (lambda x: LeakyReLU("a"), kiln.KilnTypeError,
     "LeakyReLU: expected negative_slope to be a real number, got str 'a'"),
    (lambda x: ELU(None), kiln.KilnTypeError, "ELU: expected alpha to be a real number"),
    (lambda x: Softplus(threshold="20"), kiln.KilnTypeError,
     "Softplus: expected threshold to be a real number"),
    (lambda x: Hardtanh(2, 1), kiln.KilnValueError,
     "Hardtanh: expected min_val <= max_val, got min_val=2 and max_val=1"),
    (lambda x: LeakyReLU()(t([1, 2])), kiln.DTypeError,
     "leaky_relu: expected a floating-point input, got int64"),
])
def test_activation_errors(call, error, message):
    with raises(error, match=message):
        call(t([0.5, -0.5], kiln.float32))


def test_elu_gradient_far_below_zero_is_pytorchs(torch):
    # Through expm1's own gradient, g * (y + 1), it cancelled: 0 at x = -20 in float32.
    values = np.array([-30.0, -20.0, -11.6, -1e-8, 0.0, 2.0], np.float32)
    x = t(values).requires_grad_()
    _composite.elu(x).sum().backward()
    tx = torch_twin(torch, values, kiln.float32)
    torch.nn.functional.elu(tx).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)
    second = kiln.grad(kiln.grad(lambda v: _composite.elu(v).sum()))(t([-1.0]))
    np.testing.assert_allclose(second.numpy(), [np.exp(-1.0)], rtol=1e-6)
