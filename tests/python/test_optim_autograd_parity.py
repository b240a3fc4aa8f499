"""PyTorch parity points of kiln.optim and kiln.autograd found by porting training code: SGD's
positional arguments and default lr, opt.state keyed by parameter, requires_grad_() on an op's
result, grad(materialize_grads=True), and a .grad with history kept through a plain backward.
Closed forms everywhere; PyTorch where it is installed."""

import numpy as np
import pytest

import kiln
from conftest import raises

mint = kiln.mint


def sgd_steps(opt_args, steps=3):
    p = kiln.tensor([1.0, -2.0], requires_grad=True)
    opt = kiln.optim.SGD([p], *opt_args)
    for _ in range(steps):
        p.grad = kiln.tensor([0.5, 0.25])
        opt.step()
    return p.tolist()


def test_sgd_takes_pytorchs_positional_order_and_default_lr(torch):
    # (params, lr, momentum, dampening, weight_decay, nesterov): dampening is the fourth.
    for args in ((0.1, 0.9, 0.5), (0.1, 0.9, 0.0, 0.01), (0.1, 0.9, 0.0, 0.0, True), ()):
        q = torch.tensor([1.0, -2.0], requires_grad=True)
        opt = torch.optim.SGD([q], *args)
        for _ in range(3):
            q.grad = torch.tensor([0.5, 0.25])
            opt.step()
        np.testing.assert_allclose(sgd_steps(args), q.tolist(), rtol=1e-6)


def test_sgd_dampening_is_fourth_and_lr_defaults_to_1e_3():
    # Momentum 0.9, dampening 0.5: buf = g, then 0.9 buf + 0.5 g.
    g, buf, p = 0.5, 0.5, 1.0
    p -= 0.1 * buf
    for _ in range(2):
        buf = 0.9 * buf + 0.5 * g
        p -= 0.1 * buf
    assert sgd_steps((0.1, 0.9, 0.5))[0] == pytest.approx(p, rel=1e-6)
    assert sgd_steps(())[0] == pytest.approx(1.0 - 3 * 1e-3 * 0.5, rel=1e-6)


def test_optimizer_state_is_keyed_by_parameter_too():
    p, q = mint.ones(2).requires_grad_(), mint.zeros(3).requires_grad_()
    opt = kiln.optim.Adam([p, q], lr=0.1)
    assert opt.state[p] is opt.state[0] and opt.state[q] is opt.state[1]
    assert set(opt.state[p]) == {"step", "exp_avg", "exp_avg_sq"}
    assert p in opt.state and q in opt.state and mint.ones(2) not in opt.state
    with pytest.raises(KeyError, match=r"Adam.state: this tensor \(float32\[2\]\) is none of the "
                                       r"optimizer's parameters"):
        opt.state[mint.ones(2)]
    assert len(opt.state) == 2 and list(opt.state) == [opt.state[0], opt.state[1]]


def test_requires_grad_on_an_ops_result_that_requires_grad_changes_nothing():
    x = kiln.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    assert y.requires_grad_(True) is y and y.requires_grad and not y.is_leaf
    with raises(kiln.KilnValueError, match="only a leaf tensor can be marked"):
        y.requires_grad_(False)


def test_grad_materializes_unused_inputs_as_zeros():
    x = kiln.tensor([1.0, 2.0], requires_grad=True)
    z = kiln.tensor([[3.0]], dtype=kiln.float64, requires_grad=True)
    gx, gz = kiln.autograd.grad((x * x).sum(), [x, z], materialize_grads=True)
    assert gx.tolist() == [2.0, 4.0]
    assert gz.tolist() == [[0.0]] and gz.dtype == kiln.float64
    assert kiln.autograd.grad((x * x).sum(), [x, z], allow_unused=True)[1] is None
    with raises(kiln.KilnValueError, match="materialize_grads=True gives zeros for unused "
                                           "inputs, which allow_unused=False forbids"):
        kiln.autograd.grad((x * x).sum(), [x, z], allow_unused=False, materialize_grads=True)


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
def test_a_grad_with_history_keeps_it_through_a_plain_backward(torch):
    def second(lib, tensor):
        x = tensor([1.0, 2.0, 3.0]).requires_grad_()
        (x * x).sum().backward(create_graph=True)
        (x * x).sum().backward()  # adds 2x to .grad, without a graph of its own
        assert x.grad.requires_grad
        return x.grad.tolist(), lib.autograd.grad(x.grad.sum(), x)[0].tolist()

    ours = second(kiln, kiln.tensor)
    assert ours == ([4.0, 8.0, 12.0], [2.0, 2.0, 2.0])
    assert ours == second(torch, torch.tensor)
