"""In-place writes under autograd, as PyTorch records them: ``y += b`` on a tensor an op made moves
its history on to the write; the values a write goes over are kept where the gradient reads them;
a write through a view moves its base's and the other views' histories on (CopySlices); the
writes autograd cannot follow (into a leaf that requires grad, into untracked parts of memory)
are refused. Gradients are compared with PyTorch's where it is installed, and with NumPy's."""

import gc

import numpy as np
import pytest

import kiln
from conftest import raises

mint = kiln.mint
RNG = np.random.default_rng(11)


def arrays(*shapes):
    return [RNG.standard_normal(s) for s in shapes]


def kiln_leaves(values):
    return [kiln.tensor(v, dtype=kiln.float64).requires_grad_() for v in values]


def torch_leaves(torch, values):
    return [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in values]


# Each: a name and a function of (lib, x, w) that makes y from x out of place, then writes
# into y in place (with w), returning the loss; lib is kiln.mint or torch.
IN_PLACE = [
    ("add_", lambda lib, x, w: (x * 2).add_(w)),
    ("iadd", lambda lib, x, w: _iadd(x * 2, w)),
    ("sub_", lambda lib, x, w: (x * 2).sub_(w * 3)),
    ("mul_", lambda lib, x, w: (x * 2).mul_(w)),
    ("imul", lambda lib, x, w: _imul(lib.sin(x), w)),
    ("div_", lambda lib, x, w: (x * 2).div_(w * w + 1)),
    ("mul_ number", lambda lib, x, w: (x * w).mul_(3.0)),
    ("pow_", lambda lib, x, w: (x * w).pow_(2)),
    ("sin_", lambda lib, x, w: (x * w).sin_()),
    ("exp_", lambda lib, x, w: (x * w).exp_()),
    ("sigmoid_", lambda lib, x, w: (x * w).sigmoid_()),
    ("tanh_", lambda lib, x, w: (x * w).tanh_()),
    ("clamp_", lambda lib, x, w: (x * w).clamp_(-0.5, 0.5)),
    ("lerp_", lambda lib, x, w: (x * 2).lerp_(w, 0.3)),
    ("addcmul_", lambda lib, x, w: (x * 2).addcmul_(w, x, value=0.5)),
    ("addcdiv_", lambda lib, x, w: (x * 2).addcdiv_(w, x * x + 1)),
    ("masked_fill_", lambda lib, x, w: (x * w).masked_fill_(x > 0, 2.0)),
    ("copy_", lambda lib, x, w: (x * 2).copy_(w * w)),
    ("zero_ then add_", lambda lib, x, w: (x * 2).zero_().add_(w)),
    ("fill_ then mul_", lambda lib, x, w: (x * 2).fill_(3.0).mul_(w)),
    ("twice", lambda lib, x, w: _iadd(_imul(x * 2, w), x)),
]


def _iadd(y, b):
    y += b
    return y


def _imul(y, b):
    y *= b
    return y


@pytest.mark.parametrize("name, make", IN_PLACE, ids=[n for n, _ in IN_PLACE])
def test_in_place_writes_give_pytorchs_gradients(torch, name, make):
    values = arrays((3, 4), (3, 4))
    x, w = kiln_leaves(values)
    tx, tw = torch_leaves(torch, values)
    y, ty = make(mint, x, w), make(torch, tx, tw)
    assert not y.is_leaf and y.requires_grad
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12)
    g = RNG.standard_normal((3, 4))
    mint.sum(y * kiln.tensor(g)).backward()
    (ty * torch.tensor(g)).sum().backward()
    for ours, theirs, what in ((x, tx, "x"), (w, tw, "w")):
        # (A write of a value that does not depend on x, copy_ or fill_, gives x zeros.)
        assert theirs.grad is not None and ours.grad is not None, what
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-10,
                                   atol=1e-12, err_msg=what)


def test_the_in_place_result_is_the_tensor_itself_with_the_write_as_grad_fn():
    x, b = kiln_leaves(arrays(3, 3))
    y = x * 2
    before = y.grad_fn
    z = y.add_(b)
    assert z is y and y.grad_fn.name() == "Add" and y.grad_fn is not before


def test_an_untracked_accumulator_becomes_tracked():
    (w,) = kiln_leaves(arrays(4))
    total = mint.zeros(4, dtype=kiln.float64)
    for k in range(1, 4):
        total += w * k
    assert total.requires_grad and not total.is_leaf
    mint.sum(total).backward()
    np.testing.assert_allclose(w.grad.numpy(), np.full(4, 6.0))


def test_second_derivatives_through_an_in_place_product():
    (x,) = kiln_leaves(arrays(3))
    y = x * 1.0
    y *= x  # keeps the old y (= x) for the gradient, with its history
    (dx,) = kiln.autograd.grad(mint.sum(y * y), x, create_graph=True)  # 4 x^3
    np.testing.assert_allclose(dx.detach().numpy(), 4 * x.detach().numpy() ** 3, rtol=1e-12)
    (ddx,) = kiln.autograd.grad(mint.sum(dx), x)
    np.testing.assert_allclose(ddx.numpy(), 12 * x.detach().numpy() ** 2, rtol=1e-12)


def test_a_residual_block_with_an_in_place_sum_trains_like_pytorchs(torch):
    rng = np.random.default_rng(3)
    conv = kiln.nn.Conv2d(4, 4, 3, padding=1, bias=False, dtype=kiln.float64)
    bn = kiln.nn.BatchNorm2d(4, dtype=kiln.float64)
    tconv = torch.nn.Conv2d(4, 4, 3, padding=1, bias=False).double()
    tbn = torch.nn.BatchNorm2d(4).double()
    with torch.no_grad():
        tconv.weight.copy_(torch.tensor(conv.weight.numpy()))
    data = rng.standard_normal((2, 4, 5, 5))

    def block(conv, bn, relu, x):
        out = bn(conv(x))
        out += x  # the residual sum, in place
        return relu(out)

    x = kiln.tensor(data).requires_grad_()
    tx = torch.tensor(data, requires_grad=True)
    out = block(conv, bn, kiln.nn.ReLU(inplace=True), x)
    tout = block(tconv, tbn, torch.nn.ReLU(inplace=True), tx)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-10)
    g = rng.standard_normal(out.shape)
    mint.sum(out * kiln.tensor(g)).backward()
    (tout * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(conv.weight.grad.numpy(), tconv.weight.grad.numpy(), rtol=1e-9,
                               atol=1e-12)
    np.testing.assert_allclose(bn.weight.grad.numpy(), tbn.weight.grad.numpy(), rtol=1e-9,
                               atol=1e-12)


def test_a_write_into_a_leaf_that_requires_grad_is_refused_and_leaves_it_alone():
    (x,) = kiln_leaves(arrays(3))
    before = x.numpy().copy()
    for write in (lambda: x.add_(1), lambda: x.mul_(2), lambda: x.copy_(x * 2),
                  lambda: x.zero_(), lambda: x.clamp_(0, 1), lambda: mint.exp(x, out=x)):
        with raises(kiln.KilnValueError, match="writes into a leaf tensor that requires grad"):
            write()
    np.testing.assert_array_equal(x.numpy(), before)
    assert x.is_leaf and x.grad_fn is None


def _row_add(lib, x, b):
    y = x * 2
    row = y[0]
    row += b  # y's history follows
    return (y * y).sum() + (row * 3).sum()


def _base_write_with_a_live_view(lib, x, b):
    y = x * 2
    row = y[1]
    y += b  # row's history follows
    return (y * y).sum() + (row * row * 5).sum()


def _transpose_write(lib, x, b):
    y = x * 2
    t = y.T
    t.mul_(b[:, None])
    return (y * y).sum() + t.sin().sum()


def _view_of_a_view(lib, x, b):
    y = x * 2
    v = y[:, 1:]
    w = v[0]
    w.mul_(b[1:])  # y's and v's histories follow
    return (y * y).sum() + v.exp().sum() + (w * 7).sum()


def _reshape_write_then_base_write(lib, x, b):
    y = x * 2
    flat = y.reshape(-1)
    flat[1:4].sin_()
    y.mul_(b)
    return (flat * flat).sum() + y.sum()


def _view_of_a_transposed_temporary(lib, x, b):
    out = (x * 2).T  # the product lives on only through its view
    out[0] *= b[0]
    return (out * out).sum()


def _views_whose_base_died(lib, x, b):
    y = x * 1
    v, u = y[0:2], y[:, 0]
    del y
    v[0].mul_(b)  # u's history follows
    return (v * v).sum() + (u * u * 3).sum()


def _view_of_a_copy(lib, x, b):
    c = (x * 1).T.contiguous()  # a copy: its views are its own
    c[1].mul_(2.0)
    c[0] += b[:2]
    return (c * c).sum()


WRITES_THROUGH_VIEWS = [_row_add, _base_write_with_a_live_view, _transpose_write, _view_of_a_view,
                        _reshape_write_then_base_write, _view_of_a_transposed_temporary,
                        _views_whose_base_died, _view_of_a_copy]


@pytest.mark.parametrize("make", WRITES_THROUGH_VIEWS, ids=lambda f: f.__name__.strip("_"))
def test_writes_through_views_move_the_other_tensors_history_on_as_pytorchs(torch, make):
    values = arrays((2, 3), 3)
    x, b = kiln_leaves(values)
    tx, tb = torch_leaves(torch, values)
    loss, tloss = make(mint, x, b), make(torch, tx, tb)
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-12)
    loss.backward()
    tloss.backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_writes_through_views_autograd_cannot_follow_are_refused():
    x, b = kiln_leaves(arrays((2, 3), 3))
    with raises(kiln.KilnValueError, match="writes into a view of a leaf tensor that requires"):
        x[0].add_(b)  # as PyTorch refuses it
    plain = mint.zeros((2, 3), dtype=kiln.float64)
    part = plain[1]  # a view of a tensor autograd does not track
    with raises(kiln.KilnValueError, match="part of another's memory"):
        part += b
    np.testing.assert_array_equal(plain.numpy(), np.zeros((2, 3)))
    assert x.grad is None


def test_view_ops_that_copied_or_views_of_dead_temporaries_leave_writes_free(torch):
    values = arrays((2, 3, 5), (4, 3, 3), (2, 4, 3))
    x, w, r = kiln_leaves(values)
    tx, tw, tr = torch_leaves(torch, values)
    for lib, (a, b, c) in ((kiln, (x, w, r)), (torch, (tx, tw, tr))):
        out = lib.nn.functional.conv1d(a, b)  # a squeeze of a 2-D convolution's result, here
        out += c  # a 1-D residual sum
        copied = (a * 2).transpose(1, 2).contiguous()  # a copy: no memory shared
        copied *= 3
        (out.sum() + (copied * copied).sum()).backward()
    for ours, theirs in ((x, tx), (w, tw), (r, tr)):
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-10)


def test_a_gradient_reading_a_value_written_over_later_raises_naming_it(torch):
    (x,) = kiln_leaves(arrays(3))
    y = mint.exp(x)  # Exp's gradient reads y
    y += 1
    with raises(kiln.KilnValueError, match=r"output 0 \(float64\[3\]\), saved for the "
                                           r"gradient, was changed in place(.|\n)*gradient of Exp"):
        mint.sum(y).backward()
    assert x.grad is None
    tx = torch.tensor(x.detach().numpy(), requires_grad=True)
    ty = torch.exp(tx)
    ty += 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        ty.sum().backward()  # PyTorch refuses it as well


def test_a_gradient_that_ignores_the_value_written_over_runs():
    (x,) = kiln_leaves(arrays(3))
    y = mint.sin(x)  # Sin's gradient reads x, not y
    y += 1
    mint.sum(y).backward()
    np.testing.assert_allclose(x.grad.numpy(), np.cos(x.detach().numpy()), rtol=1e-12)


def test_retain_grad_follows_the_tensor_to_its_new_history():
    (x,) = kiln_leaves(arrays(3))
    y = x * 2
    y.retain_grad()
    y *= 3
    mint.sum(y * y).backward()
    np.testing.assert_allclose(y.grad.numpy(), 2 * y.detach().numpy(), rtol=1e-12)


def test_detach_in_place_makes_a_leaf_that_does_not_require_grad():
    (x,) = kiln_leaves(arrays(3))
    y = x * 2
    assert y.detach_() is y
    assert y.is_leaf and not y.requires_grad and y.grad_fn is None
    y += 1  # a plain tensor now
    np.testing.assert_allclose(y.numpy(), 2 * x.detach().numpy() + 1)
    x.detach_()  # a leaf that required grad stops requiring it, as in PyTorch
    assert not x.requires_grad
    (w,) = kiln_leaves(arrays((2, 3)))
    base = w * 1
    view = base[0]
    with raises(kiln.KilnValueError, match=r"detach_: .*is a view(.|\n)*use detach\(\)"):
        view.detach_()
    base.detach_()  # a base with views may, as in PyTorch


def test_in_place_writes_inside_a_jitted_gradient():
    values = arrays((3, 4), (3, 4))
    w, b = (kiln.tensor(v, dtype=kiln.float64) for v in values)

    def loss(w, b):
        y = mint.tanh(w) * 2
        y += b
        y *= w
        return mint.sum(y * y)

    step = kiln.value_and_grad(loss, grad_position=(0, 1))
    eager_value, eager_grads = step(w, b)
    value, grads = kiln.jit(step)(w, b)
    np.testing.assert_allclose(value.numpy(), eager_value.numpy(), rtol=1e-12)
    for got, want in zip(grads, eager_grads):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    wv, bv = values
    y = (np.tanh(wv) * 2 + bv) * wv
    np.testing.assert_allclose(eager_grads[1].numpy(), 2 * y * wv, rtol=1e-12)


@pytest.mark.parametrize("name, args", [("relu", ()), ("relu6", ()), ("leaky_relu", (0.2,)),
                                        ("elu", (0.5,)), ("selu", ()), ("celu", (0.7,)),
                                        ("silu", ()), ("mish", ()), ("hardtanh", (-0.5, 0.5)),
                                        ("hardswish", ()), ("hardsigmoid", ()),
                                        ("threshold", (0.1, -1.0))])
def test_functional_inplace_writes_into_a_non_leaf_as_pytorchs(torch, name, args):
    values = arrays((4, 5), (4, 5))
    x, w = kiln_leaves(values)
    tx, tw = torch_leaves(torch, values)
    y, ty = x * w, tx * tw
    out = getattr(kiln.nn.functional, name)(y, *args, inplace=True)
    tout = getattr(torch.nn.functional, name)(ty, *args, inplace=True)
    assert out is y and not y.is_leaf
    # (PyTorch's float64 celu and hardsigmoid gradients carry float32 constants: 1/6 is
    # 0.16666667163 there, off in the 8th digit)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-7, atol=1e-12)
    mint.sum(y * y).backward()
    (ty * ty).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-7, atol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-7, atol=1e-12)


def test_functional_dropout_inplace_writes_into_a_non_leaf():
    (x,) = kiln_leaves([np.ones((50, 40))])
    y = x * 3.0
    kiln.manual_seed(0)
    out = kiln.nn.functional.dropout(y, 0.5, True, inplace=True)
    assert out is y
    kept = y.detach().numpy() != 0
    np.testing.assert_array_equal(y.detach().numpy()[kept], 6.0)
    mint.sum(y).backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.where(kept, 6.0, 0.0))


@pytest.mark.parametrize("sample", [lambda y: y.uniform_(-1, 1), lambda y: y.normal_(0, 2),
                                    lambda y: y.exponential_(), lambda y: y.bernoulli_(0.5)],
                         ids=["uniform_", "normal_", "exponential_", "bernoulli_"])
def test_in_place_samplers_on_a_non_leaf_pass_no_gradient_back(sample):
    (x,) = kiln_leaves(arrays(50))
    y = x * 2
    assert sample(y) is y
    assert y.requires_grad and not y.is_leaf  # as in PyTorch
    drawn = y.detach().numpy().copy()
    mint.sum(y * x).backward()
    np.testing.assert_array_equal(x.grad.numpy(), drawn)  # d(y x)/dx with y the samples
    with raises(kiln.KilnValueError, match="writes into a leaf tensor that requires grad"):
        sample(x)


def test_a_loss_summed_in_place_and_a_quotient_written_over_keep_their_gradients(torch):
    values = arrays((3, 4), (3, 4))
    x, w = kiln_leaves(values)
    tx, tw = torch_leaves(torch, values)
    for lib, (a, b) in ((mint, (x, w)), (torch, (tx, tw))):
        loss = (a * a).sum()  # Sum's and Mean's gradients do not read their result
        loss += (b * b).mean()
        q = a / (b * b + 1)  # nor Div's
        q += 1
        (loss + q.sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-12)


class _Identity(kiln.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return g


def test_a_write_into_a_functions_output_that_is_its_input_moves_the_input_on():
    x, w = kiln_leaves(arrays(4, 4))
    y = x * 2
    z = _Identity.apply(y)  # shares y's memory
    z.mul_(w)
    mint.sum(y * y).backward()  # y is 2 x w now
    xv, wv = x.detach().numpy(), w.detach().numpy()
    np.testing.assert_allclose(x.grad.numpy(), 8 * xv * wv * wv, rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), 8 * xv * xv * wv, rtol=1e-12)


def test_a_saved_tensor_detached_in_place_is_refused_where_the_gradient_reads_it():
    x, w = kiln_leaves(arrays(4, 4))
    y = x * w
    z = y * y  # Mul saved y, with its history
    y.detach_()
    with raises(kiln.KilnValueError, match="saved for the gradient, was changed in place"):
        kiln.autograd.grad(mint.sum(z), x, create_graph=True)


@pytest.mark.parametrize("write", [lambda y, w: y.zero_(), lambda y, w: y.copy_(w * w),
                                   lambda y, w: y.__setitem__(Ellipsis, w),
                                   lambda y, w: mint.mul(w, 3.0, out=y)],
                         ids=["zero_", "copy_", "setitem all", "out="])
def test_the_history_a_write_replaces_gets_zeros_as_pytorchs(write):
    # PyTorch's CopyBackwards passes zeros on to the value written over: x's gradient is zeros,
    # not None, and kiln.autograd.grad(y, x) does not say x is unused.
    x, w = kiln_leaves(arrays(4, 4))
    y = x * 2
    write(y, w)
    loss = mint.sum(y * y)
    (g,) = kiln.autograd.grad(loss, x, retain_graph=True)
    np.testing.assert_array_equal(g.numpy(), np.zeros(4))
    loss.backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros(4))


SETITEMS = {
    "row": lambda y, b: y.__setitem__(0, b),
    "column number": lambda y, b: y.__setitem__((slice(None), 1), 0.0),
    "mask": lambda y, b: y.__setitem__(y > 0, 0.0),
    "index list": lambda y, b: y.__setitem__([0, 2], b * 3),
    "augmented part": lambda y, b: y[1, 2:].__imul__(b[:2]),
}


@pytest.mark.parametrize("name", SETITEMS)
def test_assignment_into_a_non_leaf_is_recorded_as_pytorchs(torch, name):
    values = arrays((3, 4), 4)
    x, b = kiln_leaves(values)
    tx, tb = torch_leaves(torch, values)
    for a, c in ((x, b), (tx, tb)):
        y = a * 2
        SETITEMS[name](y, c)
        (y * y).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    if tb.grad is None:
        assert b.grad is None
    else:
        np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), rtol=1e-12)


def test_x_colon_is_a_view_that_writes_and_detach_go_through_as_pytorchs():
    x, w = (kiln.tensor(v).requires_grad_() for v in ([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]))
    y = x * 2
    with raises(kiln.KilnValueError, match="detach_.*is a view"):
        y[:].detach_()
    assert y.requires_grad
    everything = y[...]
    everything *= w
    mint.sum(y * y).backward()  # y = 2xw: d/dx = 8xw^2, d/dw = 8x^2w
    np.testing.assert_allclose(x.grad.numpy(), [128.0, 400.0, 864.0])
    np.testing.assert_allclose(w.grad.numpy(), [32.0, 160.0, 432.0])
    with raises(kiln.KilnValueError, match="view of a leaf"):
        x[:].add_(1.0)


def test_assignment_autograd_cannot_follow_is_refused():
    x, b = kiln_leaves(arrays((3, 4), 4))
    with raises(kiln.KilnValueError, match="view of a leaf tensor that requires grad"):
        x[0] = b
    plain = mint.zeros((3, 4), dtype=kiln.float64)
    with raises(kiln.KilnValueError, match="assignment of a value that requires grad into a "
                                           "tensor that does not"):
        plain[...] = b
    with kiln.no_grad():
        x[0] = 1.0  # an initializer's write
    assert x.is_leaf and x.detach().numpy()[0].tolist() == [1.0] * 4


@pytest.mark.parametrize("mode", ["sync", "2stage", "4stage"])
def test_writes_through_views_of_temporaries_give_one_answer_in_every_pipeline_mode(mode):
    # Which tensors share memory is decided at the write, never by how far the pipeline has got
    # (a queued call holding a temporary base made the answer vary from run to run).
    xv, wv = arrays((3, 4), (3, 4))
    previous = kiln.runtime.get_pipeline()
    kiln.runtime.set_pipeline(mode)
    try:
        for _ in range(20):
            x, w = kiln_leaves([xv, wv])
            y = (x * 1).reshape(2, 2, 3)  # a view of a temporary
            a = y[1].flatten()
            a.mul_(w.reshape(-1)[:6])
            mint.sum(y * y).backward()
            factor = np.concatenate([np.ones(6), wv.reshape(-1)[:6]]).reshape(3, 4)
            np.testing.assert_allclose(x.grad.numpy(), 2 * xv * factor * factor, rtol=1e-12)
    finally:
        kiln.runtime.set_pipeline(previous)


@pytest.mark.parametrize("mode", ["sync", "2stage", "4stage"])
def test_a_failed_out_call_not_yet_raised_is_what_backward_raises(mode):
    # In an asynchronous pipeline the call's shape error waits for a sync point; backward's rule
    # then meets y with its old shape, and the call's error, the cause, is what it raises.
    previous = kiln.runtime.get_pipeline()
    kiln.runtime.set_pipeline(mode)
    try:
        x, w = kiln_leaves(arrays(3, 4))
        y = x * 2
        kiln.runtime.synchronize()
        # (pytest.raises: the error must come from the call or backward, not a later sync.)
        with pytest.raises(kiln.ShapeError, match="out tensor 0 has shape \\[3\\], expected "):
            mint.mul(w, 3.0, out=y)
            mint.sum(y).backward()
        kiln.runtime.synchronize()  # nothing left unraised
    finally:
        kiln.runtime.set_pipeline(previous)


def test_a_write_into_a_view_whose_elements_overlap_is_refused_before_writing():
    (x,) = kiln_leaves([np.arange(8.0).reshape(2, 4)])
    y = x * 1
    with raises(kiln.KilnValueError, match="view whose elements overlap in memory"):
        y.unfold(1, 2, 1).mul_(2.0)
    np.testing.assert_array_equal(y.detach().numpy(), np.arange(8.0).reshape(2, 4))


def test_hooks_and_retained_gradients_around_a_write_through_a_view_are_pytorchs(torch):
    values = arrays((2, 3))
    (x,) = kiln_leaves(values)
    (tx,) = torch_leaves(torch, values)
    seen = {}
    for name, a in (("kiln", x), ("torch", tx)):
        y = a * 1
        v = y[1]
        v.retain_grad()
        v.mul_(2.0)
        y.register_hook(lambda g, name=name: seen.setdefault(name, g * 1))
        (v * v).sum().backward()  # v's gradient flows through y, as PyTorch's CopySlices
        seen[name + " v.grad"] = v.grad
    np.testing.assert_allclose(seen["kiln"].numpy(), seen["torch"].numpy(), rtol=1e-12)
    np.testing.assert_allclose(seen["kiln v.grad"].numpy(), seen["torch v.grad"].numpy(),
                               rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


IN_PLACE_WITHOUT_BACKWARD = {
    "y.add_(1)": lambda y: y.add_(1.0),
    "y.mul_(2)": lambda y: y.mul_(2.0),
    "y[1:].mul_(2)": lambda y: y[1:].mul_(2.0),
    "y.T[0] = 0": lambda y: y.T.__setitem__(0, 0.0),
    "y[0] += 1": lambda y: y.__setitem__(0, y[0] + 1),
    "F.relu(y, inplace=True)": lambda y: kiln.nn.functional.relu(y, inplace=True),
}


@pytest.mark.parametrize("name", IN_PLACE_WITHOUT_BACKWARD)
def test_in_place_writes_leave_no_cycles_behind_without_a_backward(name):
    # The graph of a write no backward runs through must die with its tensors: an op node that
    # kept the written tensor itself (not an alias) closed a cycle through its new history.
    (x,) = kiln_leaves([np.random.default_rng(0).random((64, 64))])

    def allocated():
        kiln.runtime.synchronize()
        gc.collect()
        return kiln.runtime.memory_stats()["allocated"]

    IN_PLACE_WITHOUT_BACKWARD[name](x * 1)  # (warm-up: caches)
    before = allocated()
    for _ in range(10):
        IN_PLACE_WITHOUT_BACKWARD[name](x * 1)
    assert allocated() == before
