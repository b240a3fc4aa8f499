"""Autograd from Python: Tensor.backward/.grad, kiln.autograd.grad, grad mode, views, custom
Functions, kiln.grad / kiln.value_and_grad (MindSpore's signatures), higher order, jit, gradcheck
and the errors. The built-in ops' gradient rules are checked one by one in test_grad_ops.py."""

import gc
import threading
import weakref

import numpy as np
import pytest

import kiln
from conftest import raises

mint = kiln.mint
RNG = np.random.default_rng(7)


def leaf(*shape, dtype=kiln.float64):
    return kiln.tensor(RNG.standard_normal(shape), dtype=dtype).requires_grad_()


def test_backward_accumulates_into_grad():
    x, w = leaf(3, 4), leaf(4, 2)
    loss = mint.sum(mint.tanh(x @ w))
    assert loss.requires_grad and not loss.is_leaf and loss.grad_fn.name() == "ReduceSum"
    assert x.is_leaf and x.grad is None
    loss.backward()
    t = np.tanh(x.numpy() @ w.numpy())
    np.testing.assert_allclose(w.grad.numpy(), x.numpy().T @ (1 - t * t), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), (1 - t * t) @ w.numpy().T, rtol=1e-12)
    first = x.grad.numpy().copy()
    mint.sum(mint.tanh(x @ w)).backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * first, rtol=1e-12)
    x.grad = None
    assert x.grad is None


def test_grad_fn_walks_to_the_leaves_through_next_functions():
    x, w = leaf(3), leaf(3)
    y = mint.sum(x * w)
    (mul, _), = y.grad_fn.next_functions
    assert mul.name() == "Mul" and mul.variable is None and y.grad_fn.variable is None
    accumulators = [node for node, _ in mul.next_functions]
    assert [node.name() for node in accumulators] == ["AccumulateGrad"] * 2
    assert accumulators[0].variable.is_same(x) and accumulators[1].variable.is_same(w)
    assert accumulators[0].variable.requires_grad
    z = mint.sum(x * mint.ones(3))  # no accumulator where no gradient flows
    assert [n is None for n, _ in z.grad_fn.next_functions[0][0].next_functions] == [False, True]


def test_autograd_grad_leaves_dot_grad_alone_and_takes_non_leaves():
    x = leaf(5)
    y = x * x
    z = mint.sum(mint.exp(y))
    gy, gx = kiln.autograd.grad(z, [y, x])
    np.testing.assert_allclose(gy.numpy(), np.exp(x.numpy() ** 2), rtol=1e-12)
    np.testing.assert_allclose(gx.numpy(), 2 * x.numpy() * np.exp(x.numpy() ** 2), rtol=1e-12)
    assert x.grad is None
    unused = leaf(2)
    with raises(kiln.KilnValueError, match="not used"):
        kiln.autograd.grad(mint.sum(x * 2), [unused])
    assert kiln.autograd.grad(mint.sum(x * 2), [unused], allow_unused=True) == (None,)


def test_backward_with_inputs_accumulates_into_those_only():
    x, w = leaf(3, 4), leaf(4, 2)
    h = x @ w
    loss = mint.sum(h * h)
    loss.backward(inputs=[w], retain_graph=True)
    assert x.grad is None
    dh = 2 * x.numpy() @ w.numpy()
    np.testing.assert_allclose(w.grad.numpy(), x.numpy().T @ dh, rtol=1e-12)
    loss.backward(inputs=w, retain_graph=True)  # one tensor; adds to .grad
    np.testing.assert_allclose(w.grad.numpy(), 2 * x.numpy().T @ dh, rtol=1e-12)
    kiln.autograd.backward(loss, inputs=(h, x))  # a non-leaf gets a .grad too
    np.testing.assert_allclose(h.grad.numpy(), dh, rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), dh @ w.numpy().T, rtol=1e-12)
    unused = leaf(2)
    mint.sum(x * 2).backward(inputs=[unused])
    assert unused.grad is None
    x.grad = None
    mint.sum(x * 2).backward(inputs=(t for t in (x, x)))  # any iterable; x named twice, once
    np.testing.assert_allclose(x.grad.numpy(), np.full(x.shape, 2.0))
    with raises(kiln.KilnValueError, match="backward: expected at least one input"):
        mint.sum(x * 2).backward(inputs=[])
    with raises(kiln.KilnValueError, match="input 1 does not require grad"):
        mint.sum(x * 2).backward(inputs=[x, kiln.tensor([1.0])])
    with raises(kiln.KilnTypeError, match="hold kiln.Tensors, got int at position 1"):
        mint.sum(x * 2).backward(inputs=[x, 1])
    with raises(kiln.KilnTypeError, match="a kiln.Tensor or a sequence of them, got str"):
        kiln.autograd.backward(mint.sum(x * 2), inputs="x")


def test_backward_with_inputs_matches_torch(torch):
    a, b = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2))
    results = []
    for lib, make in ((kiln, lambda v: kiln.tensor(v).requires_grad_()),
                      (torch, lambda v: torch.tensor(v, requires_grad=True))):
        x, w = make(a), make(b)
        h = x @ w
        loss = (h * h.exp()).sum()
        loss.backward(inputs=[w, h], retain_graph=True)
        loss.backward(inputs=[x])
        results.append([t.grad.detach().numpy() if lib is torch else t.grad.numpy()
                        for t in (x, w, h)])
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_requires_grad_returns_the_object_itself():
    x = kiln.tensor([1.0, 2.0])
    assert x.requires_grad_() is x and x.requires_grad
    p = kiln.nn.Parameter(kiln.tensor([1.0]))
    assert p.requires_grad_(False) is p and not p.requires_grad  # still a Parameter


def test_non_scalar_backward_needs_a_gradient():
    x = leaf(3)
    y = x * 3
    with raises(kiln.KilnValueError, match="one-element outputs"):
        y.backward()
    v = kiln.tensor([1.0, 2.0, 3.0], dtype=kiln.float64)
    y.backward(v)
    np.testing.assert_allclose(x.grad.numpy(), 3 * v.numpy())


def test_a_none_output_gradient_is_implied_for_one_element_outputs():
    # As in PyTorch: None stands for 1 beside given gradients (it was a zero, dropping the output),
    # and is refused for an output of more than one element.
    x = leaf(2)
    g = kiln.tensor([1.0, 2.0], dtype=kiln.float64)
    kiln.autograd.backward([mint.sum(x * 2), x * 3], [None, g])
    np.testing.assert_allclose(x.grad.numpy(), 2 + 3 * g.numpy())
    (dx,) = kiln.autograd.grad([x * 3, mint.sum(x * 2)], [x], [g, None])
    np.testing.assert_allclose(dx.numpy(), 2 + 3 * g.numpy())
    with raises(kiln.KilnValueError, match="output 0 has shape \\[2\\]; a gradient is implied only"):
        kiln.autograd.grad([x * 2, x * 3], [x], [None, g])


def test_second_backward_needs_retain_graph():
    x = leaf(3)
    y = mint.sum(mint.sin(x))
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.cos(x.numpy()), rtol=1e-12)
    with raises(kiln.KilnValueError, match="retain_graph"):
        y.backward()


def test_grad_mode_contexts_and_decorator():
    x = leaf(2)
    with kiln.no_grad():
        assert not kiln.is_grad_enabled()
        assert not (x * 2).requires_grad
        with kiln.enable_grad():
            assert (x * 2).requires_grad
    assert kiln.is_grad_enabled()

    @kiln.no_grad()
    def infer(t):
        return t * 2

    assert not infer(x).requires_grad
    with kiln.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert kiln.is_grad_enabled()

    @kiln.set_grad_enabled(False)  # as a decorator: off only while the function runs
    def frozen(t):
        assert not kiln.is_grad_enabled()
        return t * 2

    assert kiln.is_grad_enabled()
    assert not frozen(x).requires_grad
    assert kiln.is_grad_enabled()


def test_a_decorated_generator_runs_its_body_under_the_mode():
    # Calling a generator function only makes the generator: the mode must hold at each
    # resumption of its body, and the caller's mode must be back between them (as PyTorch's).
    x = leaf(2)
    seen = []

    @kiln.no_grad()
    def batches():
        for k in range(2):
            seen.append(kiln.is_grad_enabled())
            got = yield x * k
            seen.append(got)
        return "done"

    gen = batches()
    first = next(gen)
    assert not first.requires_grad and kiln.is_grad_enabled()
    assert (x * 2).requires_grad, "the caller's mode is back between steps"
    second = gen.send("sent")
    assert not second.requires_grad and kiln.is_grad_enabled()
    with pytest.raises(StopIteration) as stop:
        gen.send("last")
    assert stop.value.value == "done" and seen == [False, "sent", False, "last"]

    @kiln.enable_grad()
    def recorded():
        try:
            yield x * 2
        except KeyError:
            yield x * 3
        finally:
            seen.append(kiln.is_grad_enabled())

    with kiln.no_grad():
        gen = recorded()
        assert next(gen).requires_grad and not kiln.is_grad_enabled()
        assert gen.throw(KeyError()).requires_grad, "a thrown exception reaches the body"
        assert not kiln.is_grad_enabled()
        gen.close()
    assert seen[-1] is True, "closing runs the body's cleanup under the mode too"
    assert kiln.is_grad_enabled()


def test_no_grad_enable_grad_and_inference_mode_decorate_bare_as_in_pytorch():
    x = leaf(2)

    @kiln.no_grad
    def infer(t):
        return t * 2

    @kiln.inference_mode
    def infer_too(t):
        return t * 2

    assert infer.__name__ == "infer" and infer_too.__name__ == "infer_too"
    assert not infer(x).requires_grad and not infer_too(x).requires_grad
    assert kiln.is_grad_enabled()
    with kiln.no_grad():
        @kiln.enable_grad
        def recorded(t):
            return t * 2

        assert recorded(x).requires_grad and not kiln.is_grad_enabled()
    # set_grad_enabled's mode has no default (PyTorch refuses the bare form too); it used to
    # turn into a set_grad_enabled(True) object in the function's place.
    with raises(kiln.KilnTypeError, match=r"mode must be a bool, got function; as a decorator"):
        @kiln.set_grad_enabled
        def frozen(t):
            return t * 2
    assert kiln.is_grad_enabled()


def test_inference_mode_is_torchs_spelling_of_no_grad():
    x = leaf(2)
    with kiln.inference_mode():
        assert not kiln.is_grad_enabled()
        y = x * 2
        with kiln.inference_mode(False):  # as PyTorch: grad mode back on inside
            assert (x * 2).requires_grad
    assert kiln.is_grad_enabled() and not y.requires_grad
    # Its results may take part in autograd later (PyTorch's inference tensors may not).
    z = mint.sum(y * x)
    z.backward()
    np.testing.assert_allclose(x.grad.numpy(), y.numpy())

    @kiln.inference_mode()
    def infer(t):
        return t * 2

    assert not infer(x).requires_grad and kiln.is_grad_enabled()
    with raises(kiln.KilnTypeError, match="inference_mode: mode must be a bool, got str 'yes'"):
        kiln.inference_mode("yes")


def test_detach_shares_memory_and_stops_gradients():
    x = leaf(4)
    d = x.detach()
    assert not d.requires_grad and d.is_leaf
    assert d.numpy().__array_interface__["data"][0] == x.numpy().__array_interface__["data"][0]
    with raises(kiln.KilnValueError, match="does not require grad"):
        mint.sum(d * 2).backward()


def test_requires_grad_errors():
    with raises(kiln.DTypeError, match="floating-point"):
        kiln.tensor([1, 2, 3]).requires_grad_()
    x = leaf(2)
    with raises(kiln.KilnValueError, match="only a leaf tensor"):
        (x * 2).requires_grad_(False)  # (True is a no-op there, as in PyTorch)
    with raises(kiln.ShapeError, match="expected"):
        x.grad = kiln.tensor([1.0, 2.0, 3.0], dtype=kiln.float64)


def test_in_place_on_a_leaf_that_requires_grad_is_refused():
    x = leaf(3)
    before = x.numpy().copy()
    with raises(kiln.KilnValueError, match="Add writes into a leaf tensor that requires grad"):
        x += 1
    np.testing.assert_array_equal(x.numpy(), before)  # refused before it wrote
    with kiln.no_grad():
        x -= 1  # an optimizer's update
    assert x.requires_grad and x.is_leaf


def test_views_carry_gradients():
    x = leaf(3, 4)
    parts = [x[1], x[:, 2], x.T, x.reshape(12)[3:7], x.view(4, 3), x.unsqueeze(0),
             x.transpose(0, 1).contiguous(), x.flatten(), x.narrow(1, 1, 2), x[None, ..., 0]]
    weights = [RNG.standard_normal(tuple(p.shape)) for p in parts]
    loss = None
    for p, w in zip(parts, weights):
        term = mint.sum(p * kiln.tensor(w, dtype=kiln.float64))
        loss = term if loss is None else loss + term
    loss.backward()
    want = np.zeros((3, 4))
    want[1] += weights[0]
    want[:, 2] += weights[1]
    want += weights[2].T
    want.reshape(12)[3:7] += weights[3]
    want += weights[4].reshape(3, 4)
    want += weights[5][0]
    want += weights[6].T
    want += weights[7].reshape(3, 4)
    want[:, 1:3] += weights[8]
    want[:, 0] += weights[9][0]
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-12)


class ScaledExp(kiln.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        assert not kiln.is_grad_enabled()
        y = mint.exp(x) * scale
        ctx.save_for_backward(y)
        ctx.needs = ctx.needs_input_grad
        return y

    @staticmethod
    def backward(ctx, grad_y):
        (y,) = ctx.saved_tensors
        return grad_y * y, None


class SplitMask(kiln.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        mask = x > 0
        ctx.mark_non_differentiable(mask)
        return x * 2, mask

    @staticmethod
    def backward(ctx, grad_a, grad_mask):
        assert grad_mask is None
        return grad_a * 2


def test_python_custom_function():
    x = leaf(4)
    y = ScaledExp.apply(x, 3.0)
    assert y.grad_fn.name() == "ScaledExp"
    mint.sum(y).backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * np.exp(x.numpy()), rtol=1e-12)
    a, mask = SplitMask.apply(x)
    assert a.requires_grad and not mask.requires_grad
    (g,) = kiln.autograd.grad(mint.sum(a), x)
    np.testing.assert_allclose(g.numpy(), np.full(4, 2.0))
    assert kiln.testing.gradcheck(lambda t: ScaledExp.apply(t, 2.0), (leaf(3),))


def test_python_custom_function_saves_none_and_checks_what_it_returns():
    class Scale(kiln.autograd.Function):
        @staticmethod
        def forward(ctx, x, result, grad):
            ctx.save_for_backward(None, x)  # None keeps its place, as in PyTorch
            ctx.grad = grad
            return x * 2 if result is None else result

        @staticmethod
        def backward(ctx, g):
            none, x = ctx.saved_tensors
            assert none is None and x is not None
            return (g * 2, None, None) if ctx.grad is None else ctx.grad

    x = leaf(3)
    mint.sum(Scale.apply(x, None, None)).backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0] * 3)
    with raises(kiln.KilnTypeError, match=r"Scale.forward: expected a tensor or a tuple of tensors "
                                          r"as its result, got int"):
        Scale.apply(x, 3, None)
    with raises(kiln.KilnTypeError, match=r"got a tuple of \(Tensor, float\)"):
        Scale.apply(x, (x * 1, 2.0), None)
    with raises(kiln.KilnTypeError, match=r"Scale.backward: expected a tensor, None, or a tuple "
                                          r"of them .* got float"):
        mint.sum(Scale.apply(x, None, 1.0)).backward()

    class SavesANumber(kiln.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x, 2.0)
            return x

    with raises(kiln.KilnTypeError, match="save_for_backward: expected tensors or None, got float"):
        SavesANumber.apply(x)


def _allocated_after(step, rounds):
    for _ in range(rounds):
        step()
    gc.collect()
    kiln.runtime.synchronize()
    return kiln.runtime.memory_stats()["allocated"]


def test_graphs_are_freed_with_their_outputs():
    # A node saves its inputs and its outputs; outputs point back at their node. Nothing may
    # form a cycle, or every graph would leak (as would one through a Python Function's ctx).
    x = leaf(1000)

    def op_graph():
        z = mint.sum(mint.exp(x) * x)
        del z

    def function_graph():
        y = ScaledExp.apply(x, 2.0)
        z = mint.sum(y * y)
        del y, z

    for step in (op_graph, function_graph):
        baseline = _allocated_after(step, 1)  # after one round: lazily made constants exist
        assert _allocated_after(step, 5) == baseline


@pytest.mark.parametrize("link", ["op", "view", "in_place"])
def test_a_deep_graph_is_freed_on_a_small_stack(link, sync_pipeline):
    # 20k recorded calls (a Python loop of them) are freed by a thread with a stack of 512 KiB:
    # freeing them one inside another would need several MiB and crash the process. (Sync: an
    # asynchronous pipeline may free them on its worker thread.)
    x = leaf(2)
    before = _allocated_after(lambda: None, 0)
    y = x * 1.0
    for _ in range(20000):
        if link == "op":
            y = y * 1.0
        elif link == "view":
            y = y.view([2])
        else:
            y += 1.0
    kiln.runtime.drain()
    graph = [y]
    del y
    old_size = threading.stack_size(512 * 1024)
    try:
        thread = threading.Thread(target=graph.clear)
        thread.start()
        thread.join()
    finally:
        threading.stack_size(old_size)
    assert not graph
    assert _allocated_after(lambda: None, 0) == before


def test_gradcheck_finds_a_wrong_gradient():
    class WrongSquare(kiln.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x * 3  # should be 2

    with pytest.raises(kiln.testing.GradcheckError, match="input 0"):
        kiln.testing.gradcheck(WrongSquare.apply, (leaf(3),))
    assert not kiln.testing.gradcheck(WrongSquare.apply, (leaf(3),), raise_exception=False)
    with raises(kiln.KilnValueError, match="no input requires grad"):
        kiln.testing.gradcheck(mint.exp, (kiln.tensor([1.0]),))


def f_xyz(x, y, z):
    return mint.sum(x * y * z)


def test_functional_grad_positions():
    x, y, z = (kiln.tensor(RNG.standard_normal(3), dtype=kiln.float64) for _ in range(3))
    gx = kiln.grad(f_xyz)(x, y, z)
    np.testing.assert_allclose(gx.numpy(), (y * z).numpy(), rtol=1e-12)
    gy, gz = kiln.grad(f_xyz, grad_position=(1, 2))(x, y, z)
    np.testing.assert_allclose(gy.numpy(), (x * z).numpy(), rtol=1e-12)
    np.testing.assert_allclose(gz.numpy(), (x * y).numpy(), rtol=1e-12)
    value, g = kiln.value_and_grad(f_xyz, grad_position=-1)(x, y, z)
    np.testing.assert_allclose(value.numpy(), np.sum((x * y * z).numpy()), rtol=1e-12)
    assert not value.requires_grad
    np.testing.assert_allclose(g.numpy(), (x * y).numpy(), rtol=1e-12)
    assert not x.requires_grad, "kiln.grad must not mark the caller's tensors"
    with raises(kiln.KilnValueError, match="out of range"):
        kiln.grad(f_xyz, grad_position=3)(x, y, z)
    with raises(kiln.KilnValueError, match="grad_position -4 is out of range for 3 arguments"):
        kiln.grad(f_xyz, grad_position=(0, -4))(x, y, z)
    with raises(kiln.KilnValueError, match="both be None"):
        kiln.grad(f_xyz, grad_position=None)(x, y, z)
    for position, got in ((0.0, "float"), ((0, 1.0), r"a tuple of \(int, float\)"),
                          ("0", "str")):
        with raises(kiln.KilnTypeError, match=f"grad_position must be an int, a tuple of ints or "
                                              f"None, got {got}"):
            kiln.grad(f_xyz, grad_position=position)(x, y, z)


def test_functional_grad_weights_and_aux():
    w = leaf(3)
    frozen = kiln.tensor([1.0, 2.0, 3.0], dtype=kiln.float64)
    x = kiln.tensor(RNG.standard_normal(3), dtype=kiln.float64)

    def loss(x):
        out = mint.sum(mint.square(x * w))
        return out, x * 2

    (gw,) = kiln.grad(loss, grad_position=None, weights=[w], has_aux=True)(x)[0]
    np.testing.assert_allclose(gw.numpy(), 2 * w.numpy() * x.numpy() ** 2, rtol=1e-12)
    (gx, (gw2, gf)), aux = kiln.grad(loss, 0, [w, frozen], has_aux=True)(x)
    np.testing.assert_allclose(gw2.numpy(), gw.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gf.numpy(), np.zeros(3))
    np.testing.assert_allclose(gx.numpy(), 2 * x.numpy() * w.numpy() ** 2, rtol=1e-12)
    np.testing.assert_allclose(aux.numpy(), 2 * x.numpy())
    (value, aux2), g = kiln.value_and_grad(loss, None, w, has_aux=True)(x)
    np.testing.assert_allclose(g.numpy(), gw.numpy(), rtol=1e-12)
    assert w.grad is None, "the functional forms do not touch .grad"
    with raises(kiln.KilnValueError, match="at least two outputs, got Tensor"):
        kiln.grad(lambda x: mint.sum(x), has_aux=True)(x)


def test_functional_grad_says_what_fn_returned_and_which_weight_is_not_a_tensor():
    x = kiln.tensor([1.0, 2.0], dtype=kiln.float64)
    expected = "fn must return a tensor or a tuple of tensors to differentiate, got "
    for result, got in ((3.0, "float"), (None, "NoneType"), ({"loss": 1}, "dict"),
                        ((), r"a tuple of \(\)")):
        for form in (kiln.grad, kiln.value_and_grad):
            with raises(kiln.KilnTypeError, match=expected + got + "$"):
                form(lambda x, result=result: result)(x)
    with raises(kiln.KilnTypeError, match=expected + r"a tuple of \(Tensor, int\); to return "
                                                     r"other values with the loss, pass "
                                                     r"has_aux=True"):
        kiln.value_and_grad(lambda x: (mint.sum(x * x), 3))(x)
    with raises(kiln.KilnTypeError, match=r"with has_aux=True fn's first output is "
                                          r"differentiated and must be a tensor, got a tuple of "
                                          r"\(int, Tensor\)"):
        kiln.grad(lambda x: (3, x), has_aux=True)(x)
    with raises(kiln.KilnTypeError, match=r"weights item 1 is float, expected a kiln.Tensor"):
        kiln.grad(lambda x: mint.sum(x * x), None, [leaf(2), 1.0])(x)
    with raises(kiln.KilnTypeError, match="weights must be a tensor or a list of tensors "
                                          r"\(Parameters\), got float"):
        kiln.grad(lambda x: mint.sum(x * x), None, 1.0)(x)


def test_higher_order_gradients():
    x = kiln.tensor(RNG.standard_normal(4), dtype=kiln.float64)

    def cube_sum(t):
        return mint.sum(t * t * t)

    d1 = kiln.grad(cube_sum)
    d2 = kiln.grad(lambda t: mint.sum(d1(t)))
    d3 = kiln.grad(lambda t: mint.sum(d2(t)))
    np.testing.assert_allclose(d1(x).numpy(), 3 * x.numpy() ** 2, rtol=1e-12)
    np.testing.assert_allclose(d2(x).numpy(), 6 * x.numpy(), rtol=1e-12)
    np.testing.assert_allclose(d3(x).numpy(), np.full(4, 6.0), rtol=1e-12)
    y = leaf(3)
    assert kiln.testing.gradgradcheck(lambda t: mint.sum(mint.sin(t) * t), (y,))


@pytest.mark.parametrize("mode", ["sync", "2stage", "4stage"])
def test_every_pipeline_mode_gives_the_same_gradients(mode):
    previous = kiln.runtime.get_pipeline()
    kiln.runtime.set_pipeline(mode)
    try:
        rng = np.random.default_rng(3)
        x = kiln.tensor(rng.standard_normal((8, 5)), dtype=kiln.float32).requires_grad_()
        w = kiln.tensor(rng.standard_normal((5, 3)), dtype=kiln.float32).requires_grad_()
        loss = mint.mean(mint.square(mint.relu(x @ w) - 1.0))
        loss.backward()
        got = (x.grad.numpy().copy(), w.grad.numpy().copy())
    finally:
        kiln.runtime.set_pipeline(previous)
    xs, ws = x.detach().numpy(), w.detach().numpy()
    h = xs @ ws
    d = 2 * (np.maximum(h, 0) - 1) / h.size * (h > 0)
    np.testing.assert_allclose(got[1], xs.T @ d, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[0], d @ ws.T, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["sync", "2stage", "4stage"])
def test_only_floating_point_results_require_grad_in_every_pipeline_mode(mode):
    # In the asynchronous modes a result's dtype is decided after the call is recorded.
    previous = kiln.runtime.get_pipeline()
    kiln.runtime.set_pipeline(mode)
    try:
        x = kiln.tensor([0.5, 1.5, 2.5]).requires_grad_()
        as_int = x.to(kiln.int32)
        back = as_int.to(kiln.float32) * 2.0
        y = mint.exp(x * 2.0)  # Exp's gradient reads its saved output
        assert (as_int.requires_grad, as_int.grad_fn, as_int.is_leaf) == (False, None, True)
        assert (back.requires_grad, back.grad_fn) == (False, None)
        assert y.requires_grad and y.grad_fn.name() == "Exp"
        mint.sum(y).backward()
        got = x.grad.numpy().copy()
    finally:
        kiln.runtime.set_pipeline(previous)
    np.testing.assert_allclose(got, 2 * np.exp(2 * np.array([0.5, 1.5, 2.5])), rtol=1e-6)


def test_value_and_grad_inside_jit_matches_eager():
    rng = np.random.default_rng(5)
    w = kiln.tensor(rng.standard_normal((4, 3)), dtype=kiln.float32)
    x = kiln.tensor(rng.standard_normal((6, 4)), dtype=kiln.float32)

    def loss(w, x):
        return mint.mean(mint.square(mint.tanh(x @ w)))

    step = kiln.value_and_grad(loss)
    eager_value, eager_grad = step(w, x)
    jitted = kiln.jit(step)
    value, g = jitted(w, x)
    np.testing.assert_allclose(value.numpy(), eager_value.numpy(), rtol=1e-5)
    np.testing.assert_allclose(g.numpy(), eager_grad.numpy(), rtol=1e-5, atol=1e-6)
    text = jitted.graph(w, x)
    assert "Tanh" in text and text.count("MatMul") >= 2, text  # forward and backward, one graph


def test_results_of_a_jitted_call_carry_no_gradients():
    w = leaf(3)
    f = kiln.jit(lambda x: mint.sum(x * w))
    y = f(kiln.tensor(np.ones(3), dtype=kiln.float64))
    assert not y.requires_grad and y.grad_fn is None
    np.testing.assert_allclose(y.item(), w.detach().numpy().sum(), rtol=1e-12)


def test_integer_and_bool_results_never_require_grad():
    x = kiln.tensor([[1.0, 3.0], [4.0, 2.0]]).requires_grad_()
    values, indices = mint.max(x, 1)
    assert values.requires_grad
    assert not indices.requires_grad and not x.long().requires_grad and not (x > 2).requires_grad
    indices += 1  # an ordinary integer tensor: in-place ops are fine
    np.testing.assert_array_equal(indices.numpy(), [2, 1])

    class Split(kiln.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 2, t > 0

        @staticmethod
        def backward(ctx, g, _):
            return g * 2

    doubled, positive = Split.apply(x)
    assert doubled.requires_grad and not positive.requires_grad


def test_a_leafs_grad_has_the_leafs_dtype():
    class Widening(kiln.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 2

        @staticmethod
        def backward(ctx, g):
            return (g * 2).to(kiln.float64)

    x = kiln.tensor([1.0, 2.0], dtype=kiln.float32).requires_grad_()
    mint.sum(Widening.apply(x)).backward()
    mint.sum(Widening.apply(x)).backward()  # accumulated in float32 too
    assert x.grad.dtype == kiln.float32
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 4.0])
    y = kiln.tensor([1.0, 2.0], dtype=kiln.float32).requires_grad_()
    y.backward(kiln.tensor([1.0, 3.0], dtype=kiln.float64))
    assert y.grad.dtype == kiln.float32
    np.testing.assert_array_equal(y.grad.numpy(), [1.0, 3.0])


def test_grads_made_under_create_graph_are_tensors_of_their_own():
    a, b = leaf(2), leaf(2)
    mint.sum(a + b).backward(create_graph=True)  # Add hands one gradient to both inputs
    with kiln.no_grad():
        a.grad *= 0.0
    np.testing.assert_array_equal(b.grad.numpy(), [1.0, 1.0])
    c, v = leaf(2), kiln.tensor([1.0, 1.0], dtype=kiln.float64)
    c.backward(v, create_graph=True)
    with kiln.no_grad():
        c.grad *= 0.0
    np.testing.assert_array_equal(v.numpy(), [1.0, 1.0])
    # Still differentiable: d/dx of (d/dx sum(x^3)) = 6x.
    x = leaf(3)
    mint.sum(x * x * x).backward(create_graph=True)
    (second,) = kiln.autograd.grad(mint.sum(x.grad), [x])
    np.testing.assert_allclose(second.numpy(), 6 * x.numpy())


def test_assigning_a_value_that_requires_grad_is_refused_not_silently_detached():
    x = leaf(3)
    buf = kiln.tensor(np.zeros(3))
    with raises(kiln.KilnValueError, match="value that requires grad"):
        buf[0] = x[1] * 5.0
    np.testing.assert_array_equal(buf.numpy(), np.zeros(3))
    buf[0] = (x[1] * 5.0).detach()  # the way to say it
    assert buf.numpy()[0] == x.numpy()[1] * 5.0
    with kiln.no_grad():
        buf[1] = x[2]
    assert buf.numpy()[1] == x.numpy()[2]


def test_a_function_that_saves_its_output_has_the_right_second_derivative():
    # Backward reads y = x * x: under create_graph its use of y is differentiable through y.
    class Square(kiln.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x * x
            ctx.save_for_backward(x, y)
            return y

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            return g * 2.0 * y / x

    x = kiln.tensor([0.5, 1.5, -2.0], dtype=kiln.float64).requires_grad_()
    (g,) = kiln.autograd.grad(mint.sum(Square.apply(x)), [x], create_graph=True)
    np.testing.assert_allclose(g.numpy(), 2 * x.numpy())
    (gg,) = kiln.autograd.grad(mint.sum(g), [x])
    np.testing.assert_allclose(gg.numpy(), [2.0, 2.0, 2.0])
    assert kiln.testing.gradgradcheck(Square.apply, [leaf(4) + 3.0])


def test_an_output_kept_as_a_context_attribute_does_not_leak_the_graph():
    # ctx.y = y (where save_for_backward is meant) would make a cycle through C++: output ->
    # node -> backward closure -> context -> output. The context keeps a detached alias instead.
    import weakref

    class Marker:
        pass

    markers = []

    class Double(kiln.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x * 2.0
            ctx.y, ctx.pair, ctx.marker = y, [y, x], Marker()
            ctx.nested = {"y": y, "deeper": [(y,)]}
            markers.append(weakref.ref(ctx.marker))
            return y

        @staticmethod
        def backward(ctx, g):
            # One tensor for y wherever it was kept; x, an input, is x itself.
            assert ctx.pair[0] is ctx.y and ctx.nested["deeper"][0][0] is ctx.y
            assert not ctx.y.requires_grad and ctx.pair[1].requires_grad
            return g * ctx.y / ctx.pair[1]  # y / x == 2, from the kept values

    x = kiln.tensor([1.0, 3.0]).requires_grad_()
    y = Double.apply(x)
    mint.sum(y).backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])
    unused = Double.apply(x)  # never backward
    del y, unused
    kiln.runtime.synchronize()  # the pipeline lets go of finished calls' tensors
    gc.collect()
    assert [m() for m in markers] == [None, None]


def test_an_output_kept_as_a_context_attribute_is_differentiable_again_under_create_graph():
    class Exp(kiln.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = mint.exp(x)
            ctx.y = y
            return y

        @staticmethod
        def backward(ctx, g):
            return g * ctx.y

    class SquareKeepingItsInput(kiln.autograd.Function):  # x is also an output
        @staticmethod
        def forward(ctx, x):
            ctx.x = x
            return x, x * x

        @staticmethod
        def backward(ctx, gx, gy):
            return (gx if gx is not None else 0.0) + (gy * 2.0 * ctx.x if gy is not None else 0.0)

    x = kiln.tensor([0.5, 1.0, -1.5], dtype=kiln.float64).requires_grad_()
    (g,) = kiln.autograd.grad(mint.sum(Exp.apply(x)), [x], create_graph=True)
    (gg,) = kiln.autograd.grad(mint.sum(g), [x])
    np.testing.assert_allclose(gg.numpy(), np.exp(x.detach().numpy()), rtol=1e-12)
    assert kiln.testing.gradgradcheck(Exp.apply, (x,))
    assert kiln.testing.gradcheck(SquareKeepingItsInput.apply, (x,))
    assert kiln.testing.gradgradcheck(SquareKeepingItsInput.apply, (x,))


def test_mark_non_differentiable_holds_for_a_floating_point_output():
    class Two(kiln.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            a, b = x * 2.0, x * 3.0
            ctx.mark_non_differentiable(b)
            return a, b

        @staticmethod
        def backward(ctx, ga, gb):
            return ga * 2.0

    a, b = Two.apply(kiln.tensor([1.0, 2.0]).requires_grad_())
    assert a.requires_grad and not b.requires_grad and b.grad_fn is None


def test_as_strided_is_tracked_on_contiguous_tensors_and_refused_on_others():
    x = kiln.tensor(np.arange(6.0)).requires_grad_()
    windows = x[2:].as_strided((2, 2), (1, 1), 3)  # storage offset 3: x's elements 3, 4 and 5
    assert windows.requires_grad
    np.testing.assert_array_equal(windows.numpy(), [[3.0, 4.0], [4.0, 5.0]])
    mint.sum(windows * kiln.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=kiln.float64)).backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0, 0.0, 1.0, 5.0, 4.0])
    y = kiln.tensor(np.arange(6.0)).requires_grad_()
    np.testing.assert_array_equal(y[2:].as_strided((2,), (2,)).numpy(), [2.0, 4.0])  # y[2:]'s offset
    with raises(kiln.KilnValueError, match="non-contiguous tensor that requires grad"):
        leaf(3, 2).T.as_strided((2,), (1,), 0)
    with kiln.no_grad():  # untracked: storage strides as they are
        assert leaf(3, 2).T.as_strided((2,), (1,), 0).shape == (2,)
    # Tracked, the view stays within the tensor's elements (it said "offset -1 reach element 3");
    # untracked it reads the storage around them, as in PyTorch.
    with raises(kiln.KilnValueError, match="reaches storage elements 1 to 5, outside this "
                                           "tensor's own \\(2 to 5\\)"):
        y[2:].as_strided((3,), (2,), 1)
    with kiln.no_grad():
        assert y[2:].as_strided((3,), (2,), 1).tolist() == [1.0, 3.0, 5.0]


# ---- saved tensors changed in place before backward ---------------------------------------------


def test_changing_a_saved_input_in_place_before_backward_raises_naming_it():
    w = leaf(3)
    x = kiln.tensor(RNG.standard_normal(3))
    loss = mint.sum(w * x)
    x[1] = 5.0  # Mul saved x for w's gradient
    with raises(kiln.KilnValueError, match=r"input 1 \(float64\[3\]\), saved for the gradient, "
                r"was changed in place(.|\n)*in the gradient of Mul"):
        loss.backward()
    assert w.grad is None


@pytest.mark.parametrize("write", ["setitem", "out", "inplace_op"])
def test_every_kind_of_counted_write_is_seen(write):
    w = leaf(2, 3)
    x = kiln.tensor(RNG.standard_normal((2, 3)))
    loss = mint.sum(mint.exp(w) * x)
    row = x[0]  # a view: the write reaches x's memory through it
    if write == "setitem":
        row[...] = 0.0
    elif write == "out":
        mint.add(row, 1.0, out=row)
    else:
        row *= 2.0
    with raises(kiln.KilnValueError, match="was changed in place"):
        loss.backward()


def test_an_optimizer_step_between_forward_and_backward_raises():
    w = leaf(3)
    opt = kiln.optim.SGD([w], lr=0.1)
    first = mint.sum(mint.sin(w))
    mint.sum(mint.sin(w)).backward()
    opt.step()  # updates w in place, which Sin saved in `first` (its gradient reads it)
    with raises(kiln.KilnValueError, match=r"input 0 \(float64\[3\]\)(.|\n)*gradient of Sin"):
        first.backward()


def test_a_custom_functions_saved_tensor_changed_in_place_fails_its_backward():
    x = leaf(3)
    y = ScaledExp.apply(x, 2.0)  # saves its output y
    with kiln.no_grad():
        y += 1.0
    with raises(kiln.KilnValueError, match=r"saved tensor 0 \(float64\[3\]\)(.|\n)*ScaledExp"):
        mint.sum(y * 1.0).backward()


def test_writes_after_backward_or_into_other_tensors_leave_gradients_alone():
    w = leaf(3)
    x = kiln.tensor(RNG.standard_normal(3))
    other = kiln.tensor(RNG.standard_normal(3))
    loss = mint.sum(w * x)
    other[0] = 1.0  # not saved by the graph
    x_before = x.numpy().copy()
    loss.backward()
    np.testing.assert_array_equal(w.grad.numpy(), x_before)
    x[0] = 9.0  # the backward freed what the graph saved
    again = mint.sum(w * x.clone())
    x[0] = 7.0  # changes x, not the clone Mul saved
    again.backward()
    np.testing.assert_array_equal(w.grad.numpy(), x_before + [9.0, *x_before[1:]])


def test_retained_graph_sees_writes_between_its_backwards():
    w = leaf(3)
    x = kiln.tensor(RNG.standard_normal(3))
    loss = mint.sum(w * x)
    loss.backward(retain_graph=True)
    mint.mul(x, 2.0, out=x)
    with raises(kiln.KilnValueError, match="was changed in place"):
        loss.backward()


def test_a_refused_write_does_not_count_as_a_change_of_a_saved_tensor():
    w = leaf(3)
    x = kiln.tensor(RNG.standard_normal(3))
    loss = mint.sum(w * x)
    with raises(kiln.ShapeError):
        mint.add(x, 1.0, out=kiln.tensor(np.zeros(4)))  # refused: nothing written
    with raises(kiln.DTypeError):
        mint.add(x, 0.5, out=x.to(kiln.int64))
    loss.backward()
    np.testing.assert_array_equal(w.grad.numpy(), x.numpy())


# ---- gradient hooks and retain_grad -------------------------------------------------------------

def test_a_hook_sees_and_may_replace_a_tensors_summed_gradient():
    x = leaf(3)
    y = x * 2
    seen = []
    handle = y.register_hook(lambda g: seen.append(g.numpy().copy()) or g * 10)
    mint.sum(y * y + y).backward()  # y used twice: the hook sees the sum, 2y + 1
    np.testing.assert_allclose(seen[0], 2 * y.numpy() + 1)
    np.testing.assert_allclose(x.grad.numpy(), 2 * 10 * (2 * y.numpy() + 1))
    handle.remove()
    handle.remove()  # again: harmless
    x.grad = None
    mint.sum(x * 2 * 1).backward()
    assert len(seen) == 1  # removed
    np.testing.assert_allclose(x.grad.numpy(), [2.0] * 3)


def test_hooks_run_in_order_and_a_leafs_before_accumulation_and_in_grad():
    x = leaf(2)
    order = []
    x.register_hook(lambda g: order.append("first") or g + 1)
    x.register_hook(lambda g: order.append("second") or None)  # None keeps the gradient
    mint.sum(x * 3).backward()
    assert order == ["first", "second"]
    np.testing.assert_allclose(x.grad.numpy(), [4.0, 4.0])
    (g,) = kiln.autograd.grad(mint.sum(x * 3), x)  # grad() sees a leaf's hooks too
    np.testing.assert_allclose(g.numpy(), [4.0, 4.0])
    np.testing.assert_allclose(x.grad.numpy(), [4.0, 4.0])  # untouched by grad()


def test_grad_runs_only_the_hooks_on_its_paths():
    # grad(z, [a]) evaluates nothing off the paths to a: b's hook and c's retain_grad stay idle,
    # as in PyTorch (they ran, and c.grad was filled).
    a, b = leaf(2), leaf(2)
    c = b * 2
    c.retain_grad()
    seen = []
    b.register_hook(lambda g: seen.append("b"))
    c.register_hook(lambda g: seen.append("c"))
    a.register_hook(lambda g: seen.append("a"))
    (g,) = kiln.autograd.grad(mint.sum(a * c), [a])
    np.testing.assert_allclose(g.numpy(), c.numpy())
    assert seen == ["a"] and c.grad is None


def test_a_hook_handle_does_not_keep_its_tensor_alive():
    # A hook that removes itself refers to its handle; a handle holding the tensor closed a cycle
    # through C++ (tensor -> grad_fn -> hook -> handle -> tensor) that the collector cannot see.
    def make():
        x = leaf(3)
        y = x * 2
        handle = None

        def once(g):
            handle.remove()

        handle = y.register_hook(once)
        return weakref.ref(once)

    gone = make()
    kiln.runtime.synchronize()  # the pipeline lets go of finished calls' tensors
    gc.collect()
    assert gone() is None


def test_retain_grad_fills_a_non_leafs_grad_after_its_hooks():
    x = leaf(3)
    y = x * 2
    assert not y.retains_grad and not x.retains_grad  # a leaf's .grad is kept anyway
    y.retain_grad()
    y.retain_grad()  # again: once
    assert y.retains_grad
    y.register_hook(lambda g: g * 3)
    mint.sum(y).backward(retain_graph=True)
    np.testing.assert_array_equal(y.grad.numpy(), [3.0] * 3)
    mint.sum(y).backward()  # accumulates, as a leaf's does
    np.testing.assert_array_equal(y.grad.numpy(), [6.0] * 3)
    z = x * 2  # no retain_grad: no .grad
    mint.sum(z).backward()
    assert z.grad is None


def test_hook_errors():
    x = leaf(2)
    with raises(kiln.KilnValueError, match="register_hook: expected a tensor that requires grad"):
        kiln.tensor([1.0]).register_hook(lambda g: g)
    with raises(kiln.KilnValueError, match="retain_grad: expected a tensor that requires grad"):
        kiln.tensor([1.0]).retain_grad()
    with raises(kiln.KilnTypeError, match="register_hook: expected a callable, got int"):
        x.register_hook(3)
    for bad, error, message in [
            (lambda g: g.reshape(2, 1), kiln.ShapeError, "returned a gradient of shape \\[2, 1\\]"),
            (lambda g: g.float(), kiln.DTypeError, "returned a gradient of dtype float32"),
            (lambda g: 2.0, kiln.KilnTypeError, "must return a kiln.Tensor or None, got float")]:
        y = x * 1
        y.register_hook(bad)
        with raises(error, match=message):
            mint.sum(y).backward()
    assert x.grad is None  # nothing accumulated by the failed backwards
    mint.sum(x * 1).backward()  # and the process goes on
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])


def test_a_hook_that_raises_fails_that_backward():
    x = leaf(2)
    y = x * 1

    def hook(g):
        raise RuntimeError("from the hook")

    y.register_hook(hook)
    with raises(RuntimeError, match="from the hook"):
        mint.sum(y).backward()


def test_hooks_under_create_graph_are_differentiable():
    x = leaf(3)
    y = x * x
    y.register_hook(lambda g: g * x)  # the gradient becomes x * g
    (g,) = kiln.autograd.grad(mint.sum(y), x, create_graph=True)  # 2x * x
    np.testing.assert_allclose(g.numpy(), 2 * x.numpy() ** 2)
    (h,) = kiln.autograd.grad(mint.sum(g), x)
    np.testing.assert_allclose(h.numpy(), 4 * x.numpy())


@pytest.mark.parametrize("pipeline", ["sync", "2stage", "4stage"])
def test_backwards_through_one_graph_from_several_threads(pipeline):
    # Without retain_graph, one of them frees what the nodes saved while the others may be
    # applying them: each backward either gives the gradient or says it is a second time (it
    # read the cleared saved tensors: "the gradient rule returned 2 gradients, expected one per
    # input (0)").
    import threading
    previous = kiln.runtime.get_pipeline()
    kiln.runtime.set_pipeline(pipeline)
    try:
        outcomes = []
        for _ in range(40):
            w = kiln.mint.ones([64, 64]).requires_grad_()
            y = (w * 2.0) @ (w * 3.0)
            barrier = threading.Barrier(4)

            def run():
                barrier.wait()
                try:
                    (g,) = kiln.autograd.grad([y], [w], [kiln.mint.ones([64, 64])])
                    outcomes.append("ok" if np.allclose(g.numpy(), 768.0) else "wrong")
                except kiln.KilnValueError as error:
                    outcomes.append("second" if "a second time" in str(error) else str(error))

            threads = [threading.Thread(target=run) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        assert set(outcomes) <= {"ok", "second"}, set(outcomes) - {"ok", "second"}
        assert outcomes.count("ok") >= 40
    finally:
        kiln.runtime.set_pipeline(previous)
