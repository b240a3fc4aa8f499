"""What users porting PyTorch code found missing, against PyTorch itself: class weights of
cross_entropy / nll_loss and their cells, Embedding's padding_idx, nn.init.trunc_normal_, forward
hooks, adaptive pooling and round(decimals=), in every floating dtype where they compute: values,
gradients, reprs and state dicts. The torch-free checks and the shared cases are in
test_nn_port_extras_reference.py."""

import numpy as np
import pytest

import kiln
from conftest import FLOAT_DTYPES, check_torch, random_array, t, torch_twin
from kiln import nn
from kiln.nn import (AdaptiveAvgPool2d, AdaptiveMaxPool2d, CrossEntropyLoss, Embedding,
                     NLLLoss)
from kiln.nn.init import trunc_normal_
from test_nn_port_extras_reference import (ADAPTIVE_CASES, CLASS_CASES, IGNORE, REDUCTIONS,
                                           ROUND_DECIMALS, TRUNC_CASES, class_inputs)

mint = kiln.mint


def compare_with_gradient(torch, out, expected, x, tx, dtype, rng):
    """``out`` (kiln) against ``expected`` (torch), then the gradients of x and tx for one random
    upstream gradient."""
    assert out.dtype == dtype and out.shape == tuple(expected.shape)
    check_torch(out, expected, dtype, "value", scale_atol=True)
    if out.numel() == 0:
        return
    upstream = random_array(out.shape, dtype, rng, 0.5, 2.0)
    (grad,) = kiln.autograd.grad(out, x, t(upstream, dtype))
    (want,) = torch.autograd.grad(expected, tx, torch_twin(torch, upstream, dtype, False))
    assert grad.dtype == dtype
    check_torch(grad, want, dtype, "gradient", scale_atol=True)


# ------------------------------------------------------------------------------------------------
# Class weights


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape, smoothing, probabilities", CLASS_CASES, ids=str)
def test_weighted_cross_entropy_matches_torch(torch, shape, smoothing, probabilities, reduction,
                                              dtype, rng):
    logits, target, weight = class_inputs(shape, probabilities, rng)
    x = t(logits, kiln.float64).to(dtype).requires_grad_()
    tx = torch_twin(torch, x.numpy(), dtype)
    w = t(weight, kiln.float64).to(dtype)
    if probabilities:
        target_ours = t(target, kiln.float64).to(dtype)
        target_theirs = torch_twin(torch, target_ours.numpy(), dtype, False)
        ignore = -100  # PyTorch refuses another with probabilities
    else:
        target_ours, target_theirs, ignore = t(target), torch.tensor(target), IGNORE
    out = mint.cross_entropy(x, target_ours, reduction, ignore, smoothing, weight=w)
    expected = torch.nn.functional.cross_entropy(
        tx, target_theirs, weight=torch_twin(torch, w.numpy(), dtype, False), ignore_index=ignore,
        reduction=reduction, label_smoothing=smoothing)
    compare_with_gradient(torch, out, expected, x, tx, dtype, rng)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(6, 4), (3, 4, 5), (4,)], ids=str)
def test_weighted_nll_loss_matches_torch(torch, shape, reduction, dtype, rng):
    logits, target, weight = class_inputs(shape, False, rng)
    x = t(logits, kiln.float64).to(dtype).requires_grad_()
    tx = torch_twin(torch, x.numpy(), dtype)
    w = t(weight, kiln.float64).to(dtype)
    axis = 0 if len(shape) == 1 else 1
    out = mint.nll_loss(mint.log_softmax(x, axis), t(target), reduction, IGNORE, weight=w)
    expected = torch.nn.functional.nll_loss(
        torch.log_softmax(tx, axis), torch.tensor(target),
        weight=torch_twin(torch, w.numpy(), dtype, False), ignore_index=IGNORE,
        reduction=reduction)
    compare_with_gradient(torch, out, expected, x, tx, dtype, rng)


def test_every_target_ignored_is_pytorchs_nan_with_zero_gradients(torch):
    x = t(np.arange(12.0).reshape(3, 4) / 7).requires_grad_()
    tx = torch_twin(torch, x.numpy(), kiln.float64)
    out = mint.cross_entropy(x, t([-100] * 3), weight=t([1.0, 2.0, 3.0, 4.0]))
    expected = torch.nn.functional.cross_entropy(tx, torch.tensor([-100] * 3),
                                                 weight=torch.tensor([1.0, 2.0, 3.0, 4.0],
                                                                     dtype=torch.float64))
    assert np.isnan(out.item()) and torch.isnan(expected)
    (grad,) = kiln.autograd.grad(out, x)
    (want,) = torch.autograd.grad(expected, tx)
    np.testing.assert_array_equal(grad.numpy(), want.numpy())


@pytest.mark.parametrize("name", ["CrossEntropyLoss", "NLLLoss"])
def test_weighted_loss_cells_match_torchs_and_load_their_state(torch, name, rng):
    logits, target, weight = class_inputs((6, 4, 3), False, rng)
    if name == "CrossEntropyLoss":
        loss = CrossEntropyLoss(weight=t(weight), ignore_index=IGNORE, label_smoothing=0.1)
        reference = torch.nn.CrossEntropyLoss(torch.tensor(weight), ignore_index=IGNORE,
                                              label_smoothing=0.1)
    else:
        loss = NLLLoss("sum", weight=t(weight), ignore_index=IGNORE)
        reference = torch.nn.NLLLoss(torch.tensor(weight), reduction="sum", ignore_index=IGNORE)
    assert list(loss.state_dict()) == list(reference.state_dict()) == ["weight"]
    x = t(logits).requires_grad_()
    tx = torch_twin(torch, logits, kiln.float64)
    compare_with_gradient(torch, loss(x, t(target)), reference(tx, torch.tensor(target)), x, tx,
                          kiln.float64, rng)
    reference.weight.mul_(2.0)
    loss.load_state_dict(reference.state_dict())
    np.testing.assert_array_equal(loss.weight.numpy(), 2 * weight)


# ------------------------------------------------------------------------------------------------
# Embedding's padding_idx


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64], ids=lambda d: d.name)
@pytest.mark.parametrize("padding_idx", [0, 4, -1, -7])
def test_embedding_padding_idx_matches_torch(torch, padding_idx, dtype, rng):
    ours = Embedding(7, 3, padding_idx=padding_idx, dtype=dtype)
    theirs = torch.nn.Embedding(7, 3, padding_idx=padding_idx, dtype=getattr(torch, dtype.name))
    assert repr(ours) == repr(theirs) and ours.padding_idx == theirs.padding_idx
    np.testing.assert_array_equal(ours.weight.numpy()[ours.padding_idx], np.zeros(3))
    theirs.load_state_dict({"weight": torch.tensor(ours.weight.numpy())})
    indices = rng.integers(0, 7, (4, 5))
    indices[0, :3] = ours.padding_idx
    out, expected = ours(t(indices)), theirs(torch.tensor(indices))
    check_torch(out, expected, dtype, "value")
    upstream = random_array(out.shape, dtype, rng)
    out.backward(t(upstream, dtype))
    expected.backward(torch.tensor(upstream))
    check_torch(ours.weight.grad, theirs.weight.grad, dtype, "gradient")
    assert np.all(ours.weight.grad.numpy()[ours.padding_idx] == 0.0)


# ------------------------------------------------------------------------------------------------
# trunc_normal_


@pytest.mark.parametrize("mean, std, a, b", TRUNC_CASES)
def test_trunc_normal_samples_what_torchs_does(torch, mean, std, a, b):
    # Both sample the same distribution by the same method: their statistics agree loosely.
    kiln.manual_seed(1)
    torch.manual_seed(1)
    ours = trunc_normal_(mint.empty(100_000), mean, std, a, b).numpy().astype(np.float64)
    theirs = torch.nn.init.trunc_normal_(torch.empty(100_000), mean, std, a, b).double().numpy()
    spread = theirs.std()
    assert abs(ours.mean() - theirs.mean()) < 8 * spread / np.sqrt(ours.size)
    assert ours.std() == pytest.approx(spread, rel=0.03)
    assert ours.min() >= a and ours.max() <= b
    levels = np.linspace(0.05, 0.95, 19)
    np.testing.assert_allclose(np.quantile(ours, levels), np.quantile(theirs, levels),
                               atol=0.03 * spread)


# ------------------------------------------------------------------------------------------------
# Forward hooks


def hook_script(torch_like, cell, log):
    """The same hooks, on a kiln cell or a torch module: pre-hooks that log, replace the argument
    and prepend; forward hooks that log, replace the output and are removed again."""
    def pre_scale(module, args):
        log.append(("pre_scale", len(args)))
        return args[0] * 2.0

    def pre_first(module, args):
        log.append(("pre_first", type(args).__name__))

    def post_add(module, args, output):
        log.append(("post_add", tuple(output.shape)))
        return output + 1.0

    def post_none(module, args, output):
        log.append(("post_none", len(args)))

    handles = [cell.register_forward_pre_hook(pre_scale),
               cell.register_forward_pre_hook(pre_first, prepend=True),
               cell.register_forward_hook(post_add),
               cell.register_forward_hook(post_none)]
    x = torch_like(np.arange(6.0).reshape(2, 3))
    results = [cell(x)]
    handles[2].remove()
    results.append(cell(x))
    for handle in handles:
        handle.remove()
    results.append(cell(x))
    return [result.detach().numpy() for result in results]


def test_forward_hooks_behave_as_torchs(torch):
    ours = nn.Linear(3, 2, dtype=kiln.float64)
    theirs = torch.nn.Linear(3, 2, dtype=torch.float64)
    theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})
    our_log, their_log = [], []
    got = hook_script(lambda a: t(a), ours, our_log)
    want = hook_script(lambda a: torch.tensor(a), theirs, their_log)
    assert our_log == their_log
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    assert list(ours.state_dict()) == list(theirs.state_dict())


# ------------------------------------------------------------------------------------------------
# Adaptive pooling


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("kind", ["avg", "max"])
@pytest.mark.parametrize("shape, output_size", ADAPTIVE_CASES, ids=str)
def test_adaptive_pool_matches_torch(torch, shape, output_size, kind, dtype, rng):
    fn = getattr(mint, f"adaptive_{kind}_pool2d")
    # Small integers: many ties, where the max's gradient must pick PyTorch's element.
    values = rng.integers(-3, 4, shape).astype(np.float64)
    x = t(values, dtype).requires_grad_()
    tx = torch_twin(torch, values, dtype)
    out = fn(x, output_size)
    expected = getattr(torch.nn.functional, f"adaptive_{kind}_pool2d")(tx, output_size)
    compare_with_gradient(torch, out, expected, x, tx, dtype, rng)


@pytest.mark.parametrize("output_size", [1, (5, 7), (None, 3), [2, 2]], ids=str)
def test_adaptive_pool_cells_match_torchs(torch, output_size, rng):
    values = rng.standard_normal((2, 3, 9, 10))
    for ours, theirs in [(AdaptiveAvgPool2d(output_size),
                          torch.nn.AdaptiveAvgPool2d(output_size)),
                         (AdaptiveMaxPool2d(output_size),
                          torch.nn.AdaptiveMaxPool2d(output_size))]:
        assert repr(ours) == repr(theirs)
        x = t(values).requires_grad_()
        tx = torch_twin(torch, values, kiln.float64)
        compare_with_gradient(torch, ours(x), theirs(tx), x, tx, kiln.float64, rng)


# ------------------------------------------------------------------------------------------------
# round(decimals=)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("decimals", ROUND_DECIMALS + [0])
def test_round_decimals_is_torchs_bit_for_bit(torch, decimals, dtype, rng):
    values = t(rng.standard_normal(20_000) * 300, kiln.float64).to(dtype)
    values[:4] = t([0.125, 2.5, -0.5, 1234.5678])
    theirs = torch_twin(torch, values.numpy(), dtype, False)
    for got, want in [(mint.round(values, decimals=decimals),
                       torch.round(theirs, decimals=decimals)),
                      (values.round(decimals=decimals), theirs.round(decimals=decimals))]:
        assert got.dtype == dtype
        np.testing.assert_array_equal(got.to(kiln.float64).numpy(), want.double().numpy())


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64], ids=lambda d: d.name)
@pytest.mark.parametrize("decimals", [23, -23, 39, -39, 210, 309, -400])
def test_round_extreme_decimals_are_torchs(torch, decimals, dtype, rng):
    # 10.0 ** 23 is not the double nearest 1e23, in PyTorch's pow as in Python's; past the
    # dtype's range the scale is inf and the result NaN.
    size = 10.0 ** -decimals if abs(decimals) < 300 else 1.0
    values = t(np.round(rng.standard_normal(5000) * 1e4) * size
               + rng.standard_normal(5000) * size, kiln.float64).to(dtype)
    got = mint.round(values, decimals=decimals)
    want = torch.round(torch.tensor(values.numpy()), decimals=decimals)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
