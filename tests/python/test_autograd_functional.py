"""kiln.autograd.functional (PyTorch's torch.autograd.functional): vjp, jvp, jacobian, hessian,
vhp and hvp against closed forms, finite differences and PyTorch; their nesting, create_graph,
strict mode, kiln.jit and the errors."""

import numpy as np
import pytest

import kiln
from conftest import raises

mint = kiln.mint
F = kiln.autograd.functional
RNG = np.random.default_rng(11)
STRATEGIES = ["reverse-mode", "forward-mode"]


def t64(array):
    return kiln.tensor(np.asarray(array, dtype=np.float64), dtype=kiln.float64)


def randn(*shape):
    return RNG.standard_normal(shape)


def check(actual, expected, rtol=1e-12, atol=1e-12):
    np.testing.assert_allclose(actual.numpy(), expected, rtol=rtol, atol=atol)


def test_functional_is_exposed_as_in_pytorch():
    assert kiln.autograd.jacobian is F.jacobian and kiln.autograd.hvp is F.hvp
    assert set(F.__all__) == {"vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"}


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_jacobian_matches_closed_forms(strategy):
    a, x = randn(2, 3), randn(3)
    check(F.jacobian(lambda t: t64(a) @ t, t64(x), strategy=strategy), a)
    check(F.jacobian(mint.sin, t64(x), strategy=strategy), np.diag(np.cos(x)))
    m = randn(2, 3)  # a matrix input: the block has shape out.shape + in.shape
    want = np.zeros((2, 3, 2, 3))
    for i in range(2):
        for j in range(3):
            want[i, j, i, j] = np.exp(m[i, j])
    check(F.jacobian(mint.exp, t64(m), strategy=strategy), want)
    # A scalar output: the jacobian has the input's shape (the gradient).
    check(F.jacobian(lambda t: mint.sum(t * t), t64(x), strategy=strategy), 2 * x)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_hessian_matches_closed_forms(strategy):
    a, x = randn(3, 3), randn(3)
    quadratic = F.hessian(lambda t: mint.sum(t * (t64(a) @ t)), t64(x),
                          outer_jacobian_strategy=strategy)
    check(quadratic, a + a.T)
    check(F.hessian(lambda t: mint.sum(t * t * t), t64(x), outer_jacobian_strategy=strategy),
          np.diag(6 * x))


def test_products_match_closed_forms():
    a, x, v, u = randn(2, 3), randn(3), randn(3), randn(2)
    out, product = F.vjp(lambda t: t64(a) @ t, t64(x), t64(u))
    check(out, a @ x)
    check(product, a.T @ u)
    out, product = F.jvp(lambda t: t64(a) @ t, t64(x), t64(v))
    check(out, a @ x)
    check(product, a @ v)
    b = randn(3, 3)
    for fn in (F.vhp, F.hvp):
        out, product = fn(lambda t: mint.sum(t * (t64(b) @ t)), t64(x), t64(v))
        check(out, x @ b @ x)
        check(product, (b + b.T) @ v)
    # sum(sin(x) x^2): H = diag(2 sin x + 4x cos x - x^2 sin x)
    diag = 2 * np.sin(x) + 4 * x * np.cos(x) - x * x * np.sin(x)
    for fn in (F.vhp, F.hvp):
        check(fn(lambda t: mint.sum(mint.sin(t) * t * t), t64(x), t64(v))[1], diag * v)


def test_v_may_be_none_for_one_element_outputs_or_inputs():
    x, s = randn(3), randn()
    check(F.vjp(lambda t: mint.sum(t * t), t64(x))[1], 2 * x)
    check(F.jvp(lambda t: t * t, t64(s))[1], 2 * s)
    check(F.vhp(lambda t: t * t * t, t64(s))[1], 6 * s)
    check(F.hvp(lambda t: t * t * t, t64(s))[1], 6 * s)


def test_results_are_nested_as_the_inputs_and_outputs():
    x, w = randn(3), randn(2, 3)

    def two_outputs(x, w):
        return w @ x, mint.sum(x * x)

    blocks = F.jacobian(two_outputs, (t64(x), t64(w)))
    assert isinstance(blocks, tuple) and len(blocks) == 2
    assert all(isinstance(row, tuple) and len(row) == 2 for row in blocks)
    (y_x, y_w), (s_x, s_w) = blocks
    check(y_x, w)
    want = np.zeros((2, 2, 3))  # d (w @ x)[i] / d w[k, l] = (i == k) x[l]
    want[0, 0], want[1, 1] = x, x
    check(y_w, want)
    check(s_x, 2 * x)
    check(s_w, np.zeros((2, 3)))  # independent of w: zeros unless strict
    # A single tensor on one side drops that level; a 1-tuple keeps it.
    assert isinstance(F.jacobian(mint.sin, t64(x)), kiln.Tensor)
    one = F.jacobian(mint.sin, (t64(x),))
    assert isinstance(one, tuple) and len(one) == 1 and isinstance(one[0], kiln.Tensor)
    by_output = F.jacobian(lambda t: (mint.sin(t), mint.cos(t)), t64(x))
    assert len(by_output) == 2 and all(isinstance(b, kiln.Tensor) for b in by_output)
    by_input = F.jacobian(lambda a, b: mint.sum(a * b), (t64(x), t64(x)))
    assert len(by_input) == 2 and all(isinstance(b, kiln.Tensor) for b in by_input)
    check(by_input[0], x)

    out, (g_x, g_w) = F.vjp(lambda a, b: b @ a, (t64(x), t64(w)), t64([1.0, 2.0]))
    assert isinstance(out, kiln.Tensor)
    check(g_x, w.T @ [1.0, 2.0])
    check(g_w, np.outer([1.0, 2.0], x))
    outs, products = F.jvp(two_outputs, (t64(x), t64(w)), (t64(x), t64(w)))
    assert len(outs) == 2 and len(products) == 2
    check(products[0], 2 * w @ x)  # d(w x) along (x, w) = w x + w x
    check(products[1], 2 * x @ x)

    hess = F.hessian(lambda a, b: mint.sum(a * a * b), (t64(x), t64(x)))
    assert all(isinstance(row, tuple) and len(row) == 2 for row in hess)
    check(hess[0][0], np.diag(2 * x))
    check(hess[0][1], np.diag(2 * x))
    check(hess[1][0], np.diag(2 * x))
    check(hess[1][1], np.zeros((3, 3)))
    out, (h_a, h_b) = F.hvp(lambda a, b: mint.sum(a * a * b), (t64(x), t64(x)),
                            (t64(x), t64(x)))
    check(h_a, 4 * x * x)
    check(h_b, 2 * x * x)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_an_integer_output_gets_zeros(strategy):
    x = t64([1.0, 3.0, 2.0])
    moved, index = F.jacobian(lambda t: (mint.sin(t), mint.argmax(t)), x, strategy=strategy)
    check(moved, np.diag(np.cos([1.0, 3.0, 2.0])))
    assert index.dtype == kiln.float64  # zeros in the input's dtype, shape [] + [3]
    check(index, np.zeros(3))
    (_, found), (tangent, index_tangent) = F.jvp(lambda t: (mint.sin(t), mint.argmax(t)), x, x)
    assert found.item() == 1 and index_tangent.item() == 0
    check(tangent, np.cos([1.0, 3.0, 2.0]) * [1.0, 3.0, 2.0])


def test_inputs_are_left_alone_and_results_detached_without_create_graph():
    x = t64(randn(3)).requires_grad_()
    for result in (F.jacobian(mint.sin, x), F.hessian(lambda t: mint.sum(t ** 3), x),
                   F.vjp(mint.sin, x, t64(randn(3)))[1], F.jvp(mint.sin, x, t64(randn(3)))[1],
                   F.hvp(lambda t: mint.sum(t ** 3), x, t64(randn(3)))[1]):
        assert not result.requires_grad
    assert x.is_leaf and x.grad is None
    with kiln.no_grad():  # they record what they need even inside no_grad, as PyTorch's do
        check(F.jacobian(mint.sin, x), np.diag(np.cos(x.detach().numpy())))
        assert F.jacobian(mint.sin, x, create_graph=True).requires_grad


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_create_graph_results_can_be_differentiated_again(strategy):
    xs = randn(3)
    x = t64(xs).requires_grad_()
    jac = F.jacobian(lambda t: mint.sin(t) * t, x, create_graph=True, strategy=strategy)
    assert jac.requires_grad
    check(jac, np.diag(np.cos(xs) * xs + np.sin(xs)))
    (g,) = kiln.autograd.grad(mint.sum(jac), x)
    check(g, 2 * np.cos(xs) - xs * np.sin(xs))
    # A Jacobian of a Jacobian is a Hessian.
    check(F.jacobian(lambda t: F.jacobian(lambda s: mint.sum(s ** 4), t, create_graph=True),
                     x, strategy=strategy), np.diag(12 * xs ** 2))
    hess = F.hessian(lambda t: mint.sum(t ** 4), x, create_graph=True,
                     outer_jacobian_strategy=strategy)
    (g,) = kiln.autograd.grad(mint.sum(hess), x)  # third derivative
    check(g, 24 * xs)


def test_create_graph_products_keep_their_history_to_inputs_and_v():
    a, xs, vs = randn(3, 3), randn(3), randn(3)
    x, v = t64(xs).requires_grad_(), t64(vs).requires_grad_()
    _, product = F.vjp(lambda t: t64(a) @ (t * t), x, v, create_graph=True)  # 2 x * (a^T v)
    gx, gv = kiln.autograd.grad(mint.sum(product), [x, v])
    check(gx, 2 * (a.T @ vs))
    check(gv, a @ (2 * xs))
    _, product = F.jvp(lambda t: t64(a) @ (t * t), x, v, create_graph=True)  # a (2 x * v)
    gx, gv = kiln.autograd.grad(mint.sum(product), [x, v])
    check(gx, 2 * vs * a.sum(0))
    check(gv, 2 * xs * a.sum(0))
    for fn in (F.vhp, F.hvp):  # H v = 6 x * v for sum(x^3)
        out, product = fn(lambda t: mint.sum(t ** 3), x, v, create_graph=True)
        assert out.requires_grad
        gx, gv = kiln.autograd.grad(mint.sum(product), [x, v])
        check(gx, 6 * vs)
        check(gv, 6 * xs)


def _mlp_numpy(x, w1, b1, w2):
    return np.tanh(x @ w1 + b1) @ w2


def _mlp(x, w1, b1, w2):
    return mint.tanh(x @ w1 + b1) @ w2


def _finite_jacobian(fn, args, j, eps=1e-6):
    """d fn(*args) / d args[j] by central differences, of shape out.shape + args[j].shape."""
    base = [a.copy() for a in args]
    out_shape = fn(*base).shape
    flat = base[j].reshape(-1)
    columns = []
    for k in range(flat.size):
        saved = flat[k]
        flat[k] = saved + eps
        plus = fn(*base)
        flat[k] = saved - eps
        minus = fn(*base)
        flat[k] = saved
        columns.append((plus - minus) / (2 * eps))
    return np.stack(columns, -1).reshape(out_shape + args[j].shape)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_small_mlp_matches_finite_differences(strategy):
    args = [randn(2, 3), randn(3, 4), randn(4), randn(4, 2)]
    blocks = F.jacobian(_mlp, tuple(t64(a) for a in args), strategy=strategy)
    assert len(blocks) == 4
    for j, block in enumerate(blocks):
        check(block, _finite_jacobian(_mlp_numpy, args, j), rtol=1e-6, atol=1e-8)

    def loss(*ts):
        return mint.sum(mint.square(_mlp(*ts)))

    hess = F.hessian(loss, tuple(t64(a) for a in args), outer_jacobian_strategy=strategy)

    def gradient(j):
        def numpy_gradient(*arrays):
            ts = [t64(a).requires_grad_() for a in arrays]
            return kiln.autograd.grad(loss(*ts), ts[j])[0].numpy()
        return numpy_gradient

    for i in range(4):
        for j in range(4):
            # hess[i][j] = d (d loss / d input i) / d input j
            check(hess[i][j], _finite_jacobian(gradient(i), args, j), rtol=1e-5, atol=1e-7)
    v = [randn(*a.shape) for a in args]
    want = [sum(np.tensordot(hess[i][j].numpy(), v[j], v[j].ndim) for j in range(4))
            for i in range(4)]
    for fn in (F.hvp, F.vhp):
        _, products = fn(loss, tuple(t64(a) for a in args), tuple(t64(b) for b in v))
        for got, expected in zip(products, want):
            check(got, expected, rtol=1e-10, atol=1e-12)


def _to_torch(torch, value):
    if isinstance(value, tuple):
        return tuple(_to_torch(torch, v) for v in value)
    return torch.tensor(value.numpy())


def _same(got, want, where="result"):
    """A kiln result nested as PyTorch's, with its values. PyTorch's forward-mode jacobian nests in
    lists, its reverse mode in tuples; Kiln's nest in tuples in both."""
    if isinstance(want, (tuple, list)):
        assert isinstance(got, tuple) and len(got) == len(want), where
        for k, (g, w) in enumerate(zip(got, want)):
            _same(g, w, f"{where}[{k}]")
    else:
        assert isinstance(got, kiln.Tensor), where
        np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-12,
                                   err_msg=where)


@pytest.mark.parametrize("create_graph", [False, True])
def test_matches_torch_autograd_functional(torch, create_graph):
    tf = torch.autograd.functional
    x, w, vx, vw, vo = randn(3), randn(2, 3), randn(3), randn(2, 3), randn(2)

    def vector(lib):
        return lambda a, b: (lib.tanh(b @ a), (a * a * a).sum() * b.sum())

    def scalar(lib):
        return lambda a, b: (lib.sin(b @ a) * (b @ a)).sum()

    kw = dict(create_graph=create_graph)
    kin, tin = (t64(x), t64(w)), _to_torch(torch, (t64(x), t64(w)))
    single_k, single_t = t64(x), torch.tensor(x)
    calls = [
        ("vjp", (vector, (t64(vo), t64(1.0))), kw),
        ("jvp", (vector, (t64(vx), t64(vw))), kw),
        ("vhp", (scalar, (t64(vx), t64(vw))), kw),
        ("hvp", (scalar, (t64(vx), t64(vw))), kw),
        ("jacobian", (vector,), kw),
        ("hessian", (scalar,), kw),
    ]
    for name, (make, *rest), options in calls:
        got = getattr(F, name)(make(mint), kin, *rest, strict=True, **options)
        want = getattr(tf, name)(make(torch), tin, *_to_torch(torch, tuple(rest)), strict=True,
                                 **options)
        _same(got, want, name)
    if not create_graph:  # PyTorch's forward mode needs vectorize=True and refuses create_graph
        _same(F.jacobian(vector(mint), kin, strategy="forward-mode"),
              tf.jacobian(vector(torch), tin, vectorize=True, strategy="forward-mode"),
              "forward-mode jacobian")
    _same(F.jacobian(mint.sin, single_k, vectorize=True, **kw),
          tf.jacobian(torch.sin, single_t, **kw), "jacobian of a single tensor")
    _same(F.hessian(lambda a: (a ** 3).sum(), single_k, **kw),
          tf.hessian(lambda a: (a ** 3).sum(), single_t, **kw), "hessian of a single tensor")


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_strict_refuses_what_does_not_depend_on_the_inputs(strategy):
    x = t64(randn(3))
    ignores_second = (lambda a, b: mint.sin(a))
    # Forward mode finds it before the first column: no output depends on input 1.
    with raises(kiln.KilnValueError, match=r"jacobian: (output 0 of func|func's outputs) (is|are) "
                                           r"independent of input 1; strict=True expects every "
                                           r"output to depend"):
        F.jacobian(ignores_second, (x, x), strict=True, strategy=strategy)
    with raises(kiln.KilnValueError, match=r"jacobian: output 0 of func does not require grad"):
        F.jacobian(lambda a: a.detach() * 2, x, strict=True, strategy=strategy)
    with raises(kiln.KilnValueError, match=r"the Jacobian of output 0 with respect to input 0 "
                                           r"does not depend on the inputs"):
        F.jacobian(lambda a: a * 2, x, strict=True, create_graph=True, strategy=strategy)
    # Linear: the Hessian is zeros, which strict refuses.
    with raises(kiln.KilnValueError, match=r"hessian: the gradient of func with respect to input "
                                           r"0 does not depend on the inputs; strict=True expects "
                                           r"func to be twice differentiable"):
        F.hessian(lambda a: mint.sum(a * 2), x, strict=True, outer_jacobian_strategy=strategy)
    check(F.hessian(lambda a: mint.sum(a * 2), x, outer_jacobian_strategy=strategy),
          np.zeros((3, 3)))


def test_strict_products():
    x, v = t64(randn(3)), t64(randn(3))
    with raises(kiln.KilnValueError, match=r"vjp: func's outputs are independent of input 1"):
        F.vjp(lambda a, b: mint.sin(a), (x, x), v, strict=True)
    check(F.vjp(lambda a, b: mint.sin(a), (x, x), v)[1][1], np.zeros(3))
    with raises(kiln.KilnValueError, match=r"jvp: func's outputs are independent of input 1"):
        F.jvp(lambda a, b: mint.sin(a), (x, x), (v, v), strict=True)
    with raises(kiln.KilnValueError, match=r"jvp: output 1 of func does not require grad"):
        F.jvp(lambda a: (mint.sin(a), a.detach()), x, v, strict=True)
    _, (moved, still) = F.jvp(lambda a: (mint.sin(a), a.detach()), x, v)
    check(moved, np.cos(x.numpy()) * v.numpy())
    check(still, np.zeros(3))
    for fn in (F.vhp, F.hvp):
        with raises(kiln.KilnValueError, match=f"{fn.__name__}: the gradient of func with respect "
                                               f"to input 0 does not depend on the inputs"):
            fn(lambda a: mint.sum(a * 3), x, v, strict=True)
        check(fn(lambda a: mint.sum(a * 3), x, v)[1], np.zeros(3))
        with raises(kiln.KilnValueError, match="output 0 of func does not require grad"):
            fn(lambda a: mint.sum(a.detach()), x, v, strict=True)


def test_argument_errors_say_what_was_expected():
    x = t64(randn(3))
    with raises(kiln.KilnTypeError, match=r"jacobian: inputs must be a kiln.Tensor or a non-empty "
                                          r"tuple of them, got a list of \(Tensor\)"):
        F.jacobian(mint.sin, [x])
    with raises(kiln.KilnTypeError, match=r"vjp: inputs must be .* got a tuple of \(Tensor, "
                                          r"float\)"):
        F.vjp(lambda a, b: a * b, (x, 2.0), x)
    with raises(kiln.KilnTypeError, match=r"jacobian: inputs must be .* got a tuple of \(\)"):
        F.jacobian(mint.sin, ())
    with raises(kiln.KilnTypeError, match=r"jvp: func's result must be .* got float"):
        F.jvp(lambda a: 1.0, x, x)
    with raises(kiln.KilnValueError, match=r"vjp: v may be None only where func's outputs are a "
                                           r"single one-element tensor, got shapes \[\[3\]\]"):
        F.vjp(mint.sin, x)
    with raises(kiln.KilnValueError, match=r"hvp: v may be None only where func's inputs are a "
                                           r"single one-element tensor, got shapes "
                                           r"\[\[3\], \[3\]\]"):
        F.hvp(lambda a, b: mint.sum(a * b), (x, x))
    with raises(kiln.ShapeError, match=r"jvp: v has shape \[2\], expected \[3\], the shape of "
                                       r"item 0 of func's inputs"):
        F.jvp(mint.sin, x, t64([1.0, 2.0]))
    with raises(kiln.ShapeError, match=r"vjp: v\[1\] has shape \[3\], expected \[\]"):
        F.vjp(lambda a: (a, mint.sum(a)), x, (x, x))
    with raises(kiln.KilnValueError, match=r"vjp: v has 1 tensors, expected 2, one per item of "
                                           r"func's outputs"):
        F.vjp(lambda a: (a, mint.sum(a)), x, (x,))
    with raises(kiln.KilnTypeError, match=r"hessian: func must return a single tensor, got a "
                                          r"tuple of 2"):
        F.hessian(lambda a: (mint.sum(a), mint.sum(a)), x)
    with raises(kiln.KilnValueError, match=r"vhp: func must return a one-element tensor, got "
                                           r"shape \[3\]"):
        F.vhp(mint.sin, x, x)
    with raises(kiln.KilnValueError, match=r"jacobian: strategy must be \"reverse-mode\" or "
                                           r"\"forward-mode\", got 'sideways'"):
        F.jacobian(mint.sin, x, strategy="sideways")


def test_inside_jit_matches_eager():
    a, x, v = randn(3, 3), randn(3), randn(3)

    def step(x, w, v):
        return (F.jacobian(lambda t: mint.tanh(w @ t), x),
                F.jacobian(lambda t: mint.tanh(w @ t), x, strategy="forward-mode"),
                F.hessian(lambda t: mint.sum(t * t * t), x),
                F.vjp(mint.sin, x, v)[1], F.jvp(mint.sin, x, v)[1],
                F.vhp(lambda t: mint.sum(mint.sin(t)), x, v)[1],
                F.hvp(lambda t: mint.sum(mint.sin(t)), x, v)[1])

    eager = step(t64(x), t64(a), t64(v))
    jitted = kiln.jit(step)
    for got, want in zip(jitted(t64(x), t64(a), t64(v)), eager):
        check(got, want.numpy())
    text = jitted.graph(t64(x), t64(a), t64(v))
    assert "Tanh" in text and "Sin" in text and "Cos" in text, text


def test_a_jitted_function_inside_func_is_refused():
    # Its results carry no gradient: the jacobian would be zeros.
    jitted_sin = kiln.jit(mint.sin)
    with raises(kiln.KilnValueError, match="a jitted function's results carry no gradient"):
        F.jacobian(jitted_sin, t64(randn(3)))
