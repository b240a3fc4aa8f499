"""kiln.nn.Cell's full backward hooks (register_full_backward_pre_hook and
register_full_backward_hook, kiln/nn/_backward_hooks.py): call order, gradients seen and
replaced, handles, no_grad, inputs without grad, tuple outputs, errors, copies and kiln.jit;
closed forms, and PyTorch where present."""

import copy
import pickle

import numpy as np
import pytest

import kiln
from conftest import raises
from kiln import mint, nn
from kiln.errors import KilnTypeError, KilnValueError

W = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]])
B = np.array([0.25, -0.5])
X = np.array([[1.0, -2.0, 0.5], [3.0, 1.0, -1.0]])
C = np.array([[1.0, 2.0], [-3.0, 0.5]])  # the loss is sum(y * C): its grad_output is C


def kt(array, requires_grad=False):
    t = kiln.tensor(np.asarray(array, np.float64), dtype=kiln.float64)
    return t.requires_grad_() if requires_grad else t


def linear():
    lin = nn.Linear(3, 2, dtype=kiln.float64)
    lin.load_state_dict({"weight": W, "bias": B})
    return lin


class Pair(nn.Cell):
    """Two tensor inputs around a number; two outputs, a tensor and a tuple's worth."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(kt([2.0]))

    def construct(self, a, k, b):
        return a * b * self.scale * k, a + b


def values(grads):
    """A hook's gradient tuple as NumPy arrays (None kept)."""
    return [None if g is None else g.detach().numpy().copy() for g in grads]


def recorder(log, name):
    """A pre hook (one argument after the cell) or full hook (two) that logs what it sees."""
    def hook(cell, *grads):
        log.append((name,) + tuple(values(g) for g in grads))
    return hook


def double_grad_output(cell, grad_output):
    return tuple(None if g is None else g * 2 for g in grad_output)


def test_linear_hooks_see_closed_form_gradients_in_order():
    lin, log = linear(), []
    lin.register_full_backward_hook(recorder(log, "full"))
    lin.register_full_backward_pre_hook(recorder(log, "pre"))
    lin.register_full_backward_hook(recorder(log, "first"), prepend=True)
    x = kt(X, requires_grad=True)
    mint.sum(lin(x) * kt(C)).backward()
    assert [entry[0] for entry in log] == ["pre", "first", "full"]
    (grad_output,) = log[0][1]
    np.testing.assert_allclose(grad_output, C)
    for _, grad_input, seen_output in log[1:]:
        np.testing.assert_allclose(grad_input[0], C @ W)
        np.testing.assert_allclose(seen_output[0], C)
    np.testing.assert_allclose(x.grad.numpy(), C @ W)
    np.testing.assert_allclose(lin.weight.grad.numpy(), C.T @ X)


def test_a_pre_hook_replaces_grad_output_for_everything_below():
    lin, log = linear(), []
    lin.register_full_backward_pre_hook(double_grad_output)
    lin.register_full_backward_hook(recorder(log, "full"))
    x = kt(X, requires_grad=True)
    mint.sum(lin(x) * kt(C)).backward()
    np.testing.assert_allclose(log[0][2][0], 2 * C)  # the full hook sees the new grad_output
    np.testing.assert_allclose(x.grad.numpy(), 2 * C @ W)
    np.testing.assert_allclose(lin.weight.grad.numpy(), 2 * C.T @ X)
    np.testing.assert_allclose(lin.bias.grad.numpy(), 2 * C.sum(0))


def test_a_full_hook_replaces_grad_input_only():
    lin = linear()
    lin.register_full_backward_hook(lambda cell, gi, go: (gi[0] * 3,))
    x = kt(X, requires_grad=True)
    mint.sum(lin(x) * kt(C)).backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * C @ W)
    np.testing.assert_allclose(lin.weight.grad.numpy(), C.T @ X)


def test_handles_remove_the_hooks():
    lin, log = linear(), []
    handle = lin.register_full_backward_hook(recorder(log, "full"))
    with lin.register_full_backward_pre_hook(recorder(log, "pre")):
        mint.sum(lin(kt(X, requires_grad=True))).backward()
    assert [entry[0] for entry in log] == ["pre", "full"]
    handle.remove()
    handle.remove()  # again: nothing
    assert not lin._backward_hooks and not lin._backward_pre_hooks
    x = kt(X, requires_grad=True)
    y = lin(x)
    assert y.grad_fn.name() != "BackwardHookFunction"  # no hooks: construct's output as is
    mint.sum(y).backward()
    assert len(log) == 2


def test_no_hook_fires_under_no_grad_nor_without_any_gradient():
    lin, log = linear(), []
    lin.register_full_backward_pre_hook(recorder(log, "pre"))
    lin.register_full_backward_hook(recorder(log, "full"))
    with kiln.no_grad():
        y = lin(kt(X, requires_grad=True))
    assert not y.requires_grad
    lin.requires_grad_(False)
    assert not lin(kt(X)).requires_grad
    assert log == []


def test_an_input_without_grad_still_fires_the_hooks_with_none():
    lin, log = linear(), []
    lin.register_full_backward_pre_hook(recorder(log, "pre"))
    lin.register_full_backward_hook(recorder(log, "full"))
    mint.sum(lin(kt(X)) * kt(C)).backward()
    assert [entry[0] for entry in log] == ["pre", "full"]
    assert log[1][1] == [None]
    np.testing.assert_allclose(log[1][2][0], C)
    np.testing.assert_allclose(lin.weight.grad.numpy(), C.T @ X)


def test_a_hook_may_not_return_gradients_for_inputs_without_grad():
    lin = linear()
    lin.register_full_backward_hook(lambda cell, gi, go: (kt(X),))
    with raises(KilnValueError, match="none of whose arguments requires grad"):
        mint.sum(lin(kt(X))).backward()


def test_two_inputs_and_a_tuple_output_in_closed_form():
    pair, log = Pair(), []
    pair.register_full_backward_pre_hook(recorder(log, "pre"))
    pair.register_full_backward_hook(recorder(log, "full"))
    a, b = kt([1.0, 2.0], requires_grad=True), kt([3.0, -1.0], requires_grad=True)
    product, total = pair(a, 5.0, b)
    mint.sum(product).backward()  # the second output gets no gradient
    (_, pre_output), (_, grad_input, grad_output) = log
    np.testing.assert_allclose(pre_output[0], [1.0, 1.0])
    assert pre_output[1] is None and grad_output[1] is None
    np.testing.assert_allclose(grad_input[0], [30.0, -10.0])  # b * scale * k
    assert grad_input[1] is None  # the number
    np.testing.assert_allclose(grad_input[2], [10.0, 20.0])  # a * scale * k
    np.testing.assert_allclose(pair.scale.grad.numpy(), [5.0 * (3.0 - 2.0)])


def test_a_pair_with_one_input_without_grad_gets_none_for_it():
    pair, log = Pair(), []
    pair.register_full_backward_hook(recorder(log, "full"))
    a = kt([1.0, 2.0], requires_grad=True)
    product, total = pair(a, 5.0, kt([3.0, -1.0]))
    mint.sum(product + total).backward()
    (_, grad_input, grad_output) = log[0]
    np.testing.assert_allclose(grad_input[0], [31.0, -9.0])
    assert grad_input[1] is None and grad_input[2] is None
    np.testing.assert_allclose(grad_output[1], [1.0, 1.0])


@pytest.mark.parametrize("result, error, match", [
    ((kt(C), kt(C)), KilnValueError, "expected 1 entries in the grad_output"),
    (kt(C), KilnTypeError, "expected None or a tuple of tensors"),
    ((1.0,), KilnTypeError, r"got a tuple of \(float\)"),
])
def test_a_pre_hook_returning_a_wrong_value_is_refused(result, error, match):
    lin = linear()
    lin.register_full_backward_pre_hook(lambda cell, go: result)
    y = mint.sum(lin(kt(X, requires_grad=True)))
    with raises(error, match=match):
        y.backward()


def test_registering_a_non_callable_is_refused():
    with raises(KilnTypeError, match="expected a callable hook"):
        linear().register_full_backward_hook(3)
    with raises(KilnTypeError, match="prepend"):
        linear().register_full_backward_pre_hook(double_grad_output, prepend="yes")


def test_the_registries_are_internal_and_copies_keep_the_hooks():
    lin = linear()
    with raises(KilnValueError, match="already an attribute"):
        lin.add_module("_backward_hooks", nn.Linear(1, 1))
    handle = lin.register_full_backward_pre_hook(double_grad_output)
    for twin in (copy.deepcopy(lin), pickle.loads(pickle.dumps(lin))):
        x = kt(X, requires_grad=True)
        mint.sum(twin(x) * kt(C)).backward()
        np.testing.assert_allclose(x.grad.numpy(), 2 * C @ W)
        assert twin._backward_pre_hooks is not lin._backward_pre_hooks
    handle.remove()
    assert len(copy.deepcopy(lin)._backward_pre_hooks) == 0
    assert copy.copy(lin)._backward_pre_hooks is lin._backward_pre_hooks


def test_an_output_that_is_no_tensor_or_tuple_warns_and_gets_no_hooks():
    class Listing(nn.Cell):
        def construct(self, x):
            return [x * 2]

    cell, log = Listing(), []
    cell.register_full_backward_pre_hook(recorder(log, "pre"))
    with pytest.warns(UserWarning, match="should be a tensor or a tuple, got list"):
        (y,) = cell(kt(X, requires_grad=True))
    mint.sum(y).backward()
    assert log == []


def test_under_jit_hooks_run_at_the_trace_and_gradients_match_eager():
    lin, calls = linear(), []

    def triple_input_grad(cell, grad_input, grad_output):
        calls.append(len(grad_input))
        return (grad_input[0] * 3,)

    lin.register_full_backward_pre_hook(double_grad_output)
    lin.register_full_backward_hook(triple_input_grad)
    step = kiln.grad(lambda x, c: mint.sum(lin(x) * c))
    eager = step(kt(X), kt(C)).numpy()
    np.testing.assert_allclose(eager, 6 * C @ W)
    jitted = kiln.jit(step)
    for _ in range(2):
        np.testing.assert_allclose(jitted(kt(X), kt(C)).numpy(), eager)
    assert calls == [1, 1]  # eager, then the trace only


# ---- Against PyTorch --------------------------------------------------------------------------

def torch_linear(torch):
    lin = torch.nn.Linear(3, 2, dtype=torch.float64)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor(W))
        lin.bias.copy_(torch.tensor(B))
    return lin


def torch_pair(torch):
    class TorchPair(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = torch.nn.Parameter(torch.tensor([2.0], dtype=torch.float64))

        def forward(self, a, k, b):
            return a * b * self.scale * k, a + b

    return TorchPair()


def tensor_like(lib, array, requires_grad):
    if lib is kiln:
        return kt(array, requires_grad)
    return lib.tensor(np.asarray(array, np.float64), requires_grad=requires_grad)


def hooked_run(lib, cell, inputs, requires_grad, loss_of):
    """Registers logging and gradient-changing hooks on ``cell``, runs a backward and returns
    the log and the gradients of the inputs and parameters."""
    log = []

    def pre(cell, grad_output):
        log.append(("pre", values(grad_output)))
        return tuple(None if g is None else g * 2 for g in grad_output)

    def full(cell, grad_input, grad_output):
        log.append(("full", values(grad_input), values(grad_output)))
        if all(g is None for g in grad_input):
            return None
        return tuple(None if g is None else g - 1 for g in grad_input)

    cell.register_full_backward_hook(full)
    cell.register_full_backward_pre_hook(pre)
    cell.register_full_backward_hook(recorder(log, "first"), prepend=True)
    removed = cell.register_full_backward_pre_hook(recorder(log, "removed"))
    removed.remove()
    args = [tensor_like(lib, a, requires_grad) if isinstance(a, np.ndarray) else a
            for a in inputs]
    loss_of(cell(*args)).backward()
    grads = [a.grad for a in args if hasattr(a, "grad")] + [p.grad for p in cell.parameters()]
    return log, values(grads)


def assert_same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if isinstance(w, (list, tuple)):
            assert_same(g, w)
        elif isinstance(w, np.ndarray):
            np.testing.assert_allclose(g, w, rtol=1e-12)
        else:
            assert g == w


# PyTorch warns where no input requires grad: its full hooks then fire on the outputs' side.
quiet_torch = pytest.mark.filterwarnings("ignore:Full backward hook is firing")


@quiet_torch
@pytest.mark.parametrize("requires_grad", [True, False])
def test_linear_matches_torch(torch, requires_grad):
    c = np.array(C)

    def loss_of(lib):
        return lambda y: (y * tensor_like(lib, c, False)).sum()

    got = hooked_run(kiln, linear(), [X], requires_grad, loss_of(kiln))
    want = hooked_run(torch, torch_linear(torch), [X], requires_grad, loss_of(torch))
    assert_same(got, want)


@quiet_torch
@pytest.mark.parametrize("requires_grad", [True, False])
@pytest.mark.parametrize("use_second", [True, False])
def test_pair_matches_torch(torch, requires_grad, use_second):
    def loss_of(outputs):
        product, total = outputs
        return (product + total).sum() if use_second else product.sum()

    inputs = [np.array([1.0, 2.0]), 5.0, np.array([3.0, -1.0])]
    got = hooked_run(kiln, Pair(), inputs, requires_grad, loss_of)
    want = hooked_run(torch, torch_pair(torch), inputs, requires_grad, loss_of)
    assert_same(got, want)
