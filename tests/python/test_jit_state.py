"""Jitted functions that update tensors from outside or their own arguments in place (an
optimizer's step inside a jitted training step, or jitted with the parameters as arguments),
kiln_cpu's packed weights following in-place updates of captured weights, and jitted functions
following the training flags of the cells they call."""

import numpy as np
import pytest

import kiln
from conftest import raises

mint = kiln.mint


@pytest.mark.parametrize("update", ["inplace_op", "setitem"])
def test_packed_weight_follows_in_place_updates(update):
    rng = np.random.default_rng(0)
    w = kiln.tensor(rng.standard_normal((16, 32)), dtype=kiln.float32)
    x = kiln.tensor(rng.standard_normal((8, 32)), dtype=kiln.float32)
    f = kiln.jit(lambda x: mint.linear(x, w), backend="kiln_cpu")
    np.testing.assert_allclose(f(x).numpy(), x.numpy() @ w.numpy().T, rtol=1e-5, atol=1e-5)
    if update == "inplace_op":
        w *= 2.0
    else:
        w[...] = kiln.tensor(rng.standard_normal((16, 32)), dtype=kiln.float32)
    np.testing.assert_allclose(f(x).numpy(), x.numpy() @ w.numpy().T, rtol=1e-5, atol=1e-5)
    assert f.cache_info().misses == 1, "the update must not rebuild the graph"


@pytest.mark.parametrize("backend", ["kiln_cpu", "reference"])
@pytest.mark.parametrize("view", ["transposed", "every_other_column", "expanded_row"])
def test_a_captured_strided_view_follows_in_place_updates_of_its_base(backend, view):
    # The graph reads the view's memory at every run (a view node of its storage), as it does a
    # contiguous tensor's: a copy made at the trace would keep the trace's values.
    w = kiln.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    make = {"transposed": lambda w: w.T, "every_other_column": lambda w: w[:, ::2],
            "expanded_row": lambda w: w[1:2].broadcast_to((3, 4))}[view]
    expected = {"transposed": lambda w: w.T, "every_other_column": lambda w: w[:, ::2],
                "expanded_row": lambda w: np.broadcast_to(w[1:2], (3, 4))}[view]
    captured = make(w)
    f = kiln.jit(lambda x: x * captured, backend=backend)
    x = kiln.tensor(np.ones(tuple(captured.shape), np.float32))
    np.testing.assert_array_equal(f(x).numpy(), expected(w.numpy()))
    w += 100.0
    np.testing.assert_array_equal(f(x).numpy(), expected(w.numpy()))
    assert f.cache_info().misses == 1


@pytest.mark.parametrize("backend", ["kiln_cpu", "reference"])
def test_jitted_function_updates_captured_state(backend):
    total = mint.zeros((3,))
    steps = mint.zeros(())

    @kiln.jit(backend=backend)
    def accumulate(x):
        mint.add(total, x, out=total)   # in place into tensors from outside
        mint.add(steps, 1.0, out=steps)
        return total * 2       # reads see the new value, as eagerly

    ones = mint.ones((3,))
    for i in range(1, 4):
        out = accumulate(ones * i)
        np.testing.assert_allclose(out.numpy(), 2 * np.full(3, sum(range(1, i + 1))))
    np.testing.assert_allclose(total.numpy(), np.full(3, 6.0))
    assert steps.item() == 3.0
    assert accumulate.cache_info().misses == 1


def test_writing_part_of_an_outside_tensor_is_refused():
    state = mint.zeros((4,))

    @kiln.jit(backend="kiln_cpu")
    def f(x):
        part = state[1:3]
        mint.add(part, x, out=part)
        return x

    with raises(kiln.KilnNotImplementedError, match="a view of a tensor from outside"):
        f(mint.ones((2,)))


def test_jitted_training_step_matches_eager():
    rng = np.random.default_rng(1)
    x = kiln.tensor(rng.standard_normal((32, 8)), dtype=kiln.float32)
    y = kiln.tensor(rng.standard_normal((32, 1)), dtype=kiln.float32)
    w0 = rng.standard_normal((1, 8)).astype(np.float32)

    def make_step(w):
        def loss_fn(x, y):
            return mint.mean(mint.square(mint.linear(x, w) - y))

        def step(x, y):
            loss, (g,) = kiln.value_and_grad(loss_fn, grad_position=None, weights=[w])(x, y)
            with kiln.no_grad():
                mint.sub(w, g * 0.1, out=w)
            return loss

        return step

    w_eager = kiln.tensor(w0).requires_grad_()
    w_jit = kiln.tensor(w0).requires_grad_()
    eager_step, jit_step = make_step(w_eager), kiln.jit(make_step(w_jit), backend="kiln_cpu")
    for _ in range(5):
        le, lj = eager_step(x, y), jit_step(x, y)
        np.testing.assert_allclose(lj.numpy(), le.numpy(), rtol=1e-5)
    np.testing.assert_allclose(w_jit.detach().numpy(), w_eager.detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    assert jit_step.cache_info().misses == 1


@pytest.mark.parametrize("backend", ["kiln_cpu", "reference"])
def test_a_tensor_made_inside_the_function_is_a_fresh_result_at_every_call(backend):
    # Traced, kiln.tensor(...) is a constant of the graph; returned, it is copied at every call
    # (Note [Fresh outputs of a compiled graph]), so writing one result leaves the next alone.
    @kiln.jit(backend=backend)
    def f(x):
        return x + 1, kiln.tensor(np.zeros(3, np.float32))

    x = kiln.tensor(np.zeros(3, np.float32))
    _, first = f(x)
    first += 5.0
    _, second = f(x)
    np.testing.assert_array_equal(second.numpy(), np.zeros(3, np.float32))
    assert f.cache_info().misses == 1


@pytest.mark.parametrize("backend", ["kiln_cpu", "reference"])
def test_assignment_into_a_tensor_from_outside_runs_at_every_call(backend):
    # x[...] = v is an op (a Cast into the selection), recorded like any in-place write.
    state = mint.zeros((3,))

    def step(x):
        state[...] = 0.0  # reset, then accumulate
        mint.add(state, x, out=state)
        return state * 1

    f = kiln.jit(step, backend=backend)
    one = mint.ones((3,))
    for _ in range(3):
        np.testing.assert_array_equal(f(one).numpy(), np.ones(3, np.float32))
    np.testing.assert_array_equal(state.numpy(), np.ones(3, np.float32))


@pytest.mark.parametrize("backend", ["kiln_cpu", "reference"])
def test_assignment_into_part_of_an_input_lands_in_the_argument(backend):
    def f(x):
        x[0] = 5.0
        x[1:] *= 2
        return x * 1

    jitted = kiln.jit(f, backend=backend)
    for start in (1.0, 3.0):  # the trace, then the built graph, each into its call's argument
        x, eager_x = mint.full((3,), start), mint.full((3,), start)
        want = f(eager_x)
        assert jitted(x).tolist() == want.tolist()
        assert x.tolist() == eager_x.tolist() == [5.0, 2 * start, 2 * start]
    assert jitted.cache_info()[1] == 1


@pytest.mark.parametrize("backend", ["kiln_cpu", "reference"])
def test_a_jitted_optimizer_step_over_its_arguments_matches_eager(backend, rng):
    # Adam's update written in place into the parameters and moments passed as arguments.
    def step(params, grads, moments, squares, lr=0.01):
        for p, g, m, v in zip(params, grads, moments, squares):
            m.mul_(0.9).add_(g * 0.1)
            v.mul_(0.999).add_(g * g * 0.001)
            p.sub_(lr * m / (mint.sqrt(v) + 1e-8))

    def state(seed):
        r = np.random.default_rng(seed)
        shapes = [(4, 3), (3,)]
        return [[kiln.tensor(r.standard_normal(s).astype(np.float32)) for s in shapes]
                for _ in range(2)] + [[mint.zeros(s) for s in shapes] for _ in range(2)]

    jitted = kiln.jit(step, backend=backend)
    ours, eager = state(1), state(1)
    for _ in range(3):
        jitted(*ours)
        step(*eager)
        for got, want in zip(sum(ours, []), sum(eager, [])):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-7)
    other, other_eager = state(2), state(2)  # another call's tensors, the same graph
    jitted(*other)
    step(*other_eager)
    for got, want in zip(sum(other, []), sum(other_eager, [])):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-7)
    assert jitted.cache_info()[1] == 1


def test_writes_into_arguments_under_a_dynamic_batch_size():
    def f(x, y):
        x.mul_(2)
        x[:, 0] = y[:, 1]
        return x.sum(1)

    jitted = kiln.jit(f, dynamic=True)
    for n in (2, 5, 3):
        y = kiln.tensor(np.arange(n * 3, dtype=np.float32).reshape(n, 3))
        x, eager_x = mint.ones((n, 3)), mint.ones((n, 3))
        assert jitted(x, y).tolist() == f(eager_x, y).tolist()
        assert x.tolist() == eager_x.tolist()


def test_writes_into_an_argument_that_requires_grad_follow_eagers_rule():
    def unguarded(p, g):
        p.sub_(g)
        return g * 1

    def guarded(p, g):
        with kiln.no_grad():
            p.sub_(g)
        return g * 1

    p, g = kiln.nn.Parameter(mint.ones((3,))), mint.full((3,), 0.5)
    with raises(kiln.KilnValueError, match="writes into a leaf tensor that requires grad"):
        unguarded(p, g)  # eagerly
    with raises(kiln.KilnValueError, match="writes into its input 0 in place with grad mode on, "
                                           "and the tensor passed there requires grad"):
        kiln.jit(unguarded)(p, g)
    assert p.tolist() == [1.0, 1.0, 1.0]
    kiln.jit(guarded)(p, g)
    with kiln.no_grad():
        kiln.jit(unguarded)(p, g)
    assert p.tolist() == [0.0, 0.0, 0.0] and p.requires_grad
    kiln.jit(unguarded)(mint.ones((3,)), g)  # the graph traced under grad mode, no grad needed


def test_a_written_argument_that_the_function_also_reads_from_outside_is_refused():
    w = mint.zeros((3,))

    def f(x):
        x.add_(1)
        return w * 1

    jitted = kiln.jit(f)
    with raises(kiln.KilnValueError, match="one the function also reads from outside"):
        jitted(w)
    assert w.tolist() == [0.0, 0.0, 0.0]
    x = mint.zeros((3,))
    assert jitted(x).tolist() == [0.0, 0.0, 0.0] and x.tolist() == [1.0, 1.0, 1.0]

    def g(x):
        w.add_(1)
        return x * 1

    with raises(kiln.KilnValueError, match="shares its memory with a tensor from outside that "
                                           "the function writes"):
        kiln.jit(g)(w)
    assert w.tolist() == [0.0, 0.0, 0.0]


def test_a_refused_call_runs_nothing():
    def f(x, y):
        x.add_(mint.rand((3,)))
        return y * 1

    jitted = kiln.jit(f)
    jitted(mint.zeros((3,)), mint.ones((3,)))  # traced and built
    x = mint.zeros((3,))
    state = kiln.get_rng_state()
    with raises(kiln.KilnValueError, match="shares its memory"):
        jitted(x, x)
    assert kiln.get_rng_state().tolist() == state.tolist()  # the graph did not run


def test_a_written_argument_sharing_memory_with_another_is_refused():
    def f(x, y):
        x += y
        return y * 1

    jitted = kiln.jit(f)
    x = mint.ones((2, 2))
    for y in (x, x.T, x[0]):
        with raises(kiln.KilnValueError, match="writes into its input 0 in place, and input 1 "
                                               "shares its memory"):
            jitted(x, y)
        assert x.tolist() == [[1.0, 1.0], [1.0, 1.0]]  # untouched
    jitted(x, mint.ones((2, 2)))
    assert x.tolist() == [[2.0, 2.0], [2.0, 2.0]]


def _assign_rows(x):
    y = x * 2
    y[0] = 5.0
    y[1:, ::2] = x[1:, ::2] * -1
    return y


def _augmented_assignment(x):
    y = x + 0
    y[:, 1] += 10
    y[..., -1] *= y[..., 0]
    return y


def _in_place_on_views(x):
    y = x - 1
    y.T[0].mul_(3)
    row = y[1]
    row.add_(100)
    flat = y.reshape(-1)
    flat[::3] = 0
    return y, row, flat


def _masked_and_indexed(x):
    y = x * 1
    y[y > 4] = -1
    y[:, kiln.tensor([0, 2])] = 7
    return y


@pytest.mark.parametrize("backend", ["kiln_cpu", "reference"])
@pytest.mark.parametrize("fn", [_assign_rows, _augmented_assignment, _in_place_on_views,
                                _masked_and_indexed], ids=lambda f: f.__name__)
def test_writes_through_views_of_traced_values_give_the_eager_results(backend, fn):
    x = kiln.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    assert _outputs(kiln.jit(fn, backend=backend)(x)) == _outputs(fn(x))


def test_gradients_through_jitted_slice_assignments_are_the_eager_ones():
    def loss(w, x):
        y = x * w
        y[:, 0] = y[:, 0] * 3
        y.T[1].mul_(y[:, 2])
        return mint.sum(y * y)

    x = kiln.tensor(np.arange(6, dtype=np.float64).reshape(2, 3))
    w = kiln.tensor(np.linspace(0.5, 1.5, 6).reshape(2, 3)).requires_grad_()
    loss(w, x).backward()
    np.testing.assert_allclose(kiln.jit(kiln.grad(loss))(w, x).numpy(), w.grad.numpy(),
                               rtol=1e-12)
    # With dynamic=True the views' sizes and offsets follow the batch size.
    dynamic = kiln.jit(kiln.grad(loss), dynamic=True)
    for batch in (2, 3, 5):
        xb = kiln.tensor(np.arange(3.0 * batch).reshape(batch, 3))
        wb = kiln.tensor(np.linspace(0.5, 1.5, 3 * batch).reshape(batch, 3)).requires_grad_()
        loss(wb, xb).backward()
        np.testing.assert_allclose(dynamic(wb, xb).numpy(), wb.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("as_method", [False, True])
def test_a_jitted_function_follows_train_and_eval_of_the_cells_it_calls(as_method):
    class Net(kiln.nn.Cell):
        def __init__(self):
            super().__init__()
            self.linear = kiln.nn.Linear(8, 8)
            self.drop = kiln.nn.Dropout(0.9)

        def construct(self, x):
            return self.drop(self.linear(x))

    net = Net()
    f = kiln.jit(Net.construct).__get__(net) if as_method else kiln.jit(lambda x: net(x))
    x = mint.ones((64, 8))

    def dropped():
        return float((f(x).numpy() == 0).mean())

    assert dropped() > 0.5  # traced while training
    net.eval()
    assert dropped() == 0.0  # traced again in eval mode
    np.testing.assert_array_equal(f(x).numpy(), net(x).numpy())
    net.drop.train()  # one cell's flag alone
    assert dropped() > 0.5
    net.train()
    assert dropped() > 0.5
    net.eval()
    assert dropped() == 0.0
    jitted = f.__func__ if as_method else f
    assert jitted.cache_info() == (4, 2, 2)  # both graphs stay cached


def test_a_function_reading_no_training_flag_is_traced_once():
    net = kiln.nn.Linear(4, 4)
    f = kiln.jit(lambda x: net(x))
    x = mint.ones((2, 4))
    f(x)
    net.eval()
    f(x)
    assert f.cache_info() == (1, 1, 1)


def _outputs(result):
    return [r.tolist() for r in (result if isinstance(result, tuple) else (result,))]


def _write_after_reshape(x):
    t = x + 1
    v = t.reshape(2, 2)
    t -= 1
    return v * 1


def _write_after_transpose(x):
    t = x + 1
    v = mint.transpose(mint.reshape(t, [2, 2]), 0, 1)
    t *= 2
    return v + 0


def _write_after_split(x):
    t = x + 1
    a, b = mint.split(t, 2)
    t += 10
    return a * 1, b * 1


def _write_after_unsqueeze(x):
    t = x + 1
    v = mint.unsqueeze(t, 0)
    t += 1
    return v * 1


@pytest.mark.parametrize("backend", ["kiln_cpu", "reference"])
@pytest.mark.parametrize("fn", [_write_after_reshape, _write_after_transpose, _write_after_split,
                                _write_after_unsqueeze], ids=lambda f: f.__name__)
def test_a_view_ops_result_sees_later_writes_into_its_input_as_eagerly(backend, fn):
    # The jit traced view ops (kiln.mint.reshape, transpose, split, ...) as values of their own:
    # a later in-place write into the input was lost through the view.
    x = kiln.tensor(np.arange(4, dtype=np.float32))
    assert _outputs(kiln.jit(fn, backend=backend)(x)) == _outputs(fn(x))


def test_writes_through_a_view_ops_result_reach_its_base_or_a_captured_weight():
    x = kiln.tensor(np.arange(4, dtype=np.float32))

    def into_part_of_a_value(x):
        t = x + 1
        v = mint.transpose(mint.reshape(t, [2, 2]), 0, 1)
        v[0] += 10  # eagerly changes t (silently dropped by the first jit, then refused)
        return t * 1

    assert kiln.jit(into_part_of_a_value)(x).tolist() == into_part_of_a_value(x).tolist()

    def into_an_input(x):
        v = mint.reshape(x, [-1])
        v += 1
        return v * 2

    arg, eager_arg = x * 1, x * 1
    assert kiln.jit(into_an_input)(arg).tolist() == into_an_input(eager_arg).tolist()
    assert arg.tolist() == eager_arg.tolist() == [1, 2, 3, 4]
    w = kiln.tensor(np.zeros(4, np.float32))

    def update_through_a_view(x):
        wv = mint.reshape(w, [2, 2])
        wv += mint.reshape(x, [2, 2])
        return w * 1

    step = kiln.jit(update_through_a_view)
    assert step(x).tolist() == [0, 1, 2, 3] and w.tolist() == [0, 1, 2, 3]
    assert step(x).tolist() == [0, 2, 4, 6] and w.tolist() == [0, 2, 4, 6]


def test_freezing_a_weight_traces_the_gradient_again():
    # Whether a captured weight requires grad was not part of the signature: a jitted kiln.grad
    # kept the gradient of a weight frozen after the first call (and zeros after unfreezing).
    w = kiln.nn.Parameter(kiln.tensor([1.0, 2.0, 3.0]))
    x = kiln.tensor([4.0, 5.0, 6.0])
    jitted = kiln.jit(kiln.grad(lambda v: mint.sum(v * w), grad_position=None, weights=[w]))
    assert jitted(x)[0].tolist() == [4.0, 5.0, 6.0]
    w.requires_grad_(False)
    assert jitted(x)[0].tolist() == [0.0, 0.0, 0.0]
    w.requires_grad_(True)
    assert jitted(x)[0].tolist() == [4.0, 5.0, 6.0]
    assert jitted.cache_info() == (1, 2, 2)


def test_grad_mode_is_part_of_the_signature():
    # A function traced under no_grad wrote into a weight that requires grad when later called
    # with grad mode on, which eager refuses.
    w = kiln.nn.Parameter(kiln.tensor([1.0, 2.0]))
    f = kiln.jit(lambda x: mint.mul(w, x, out=w))
    with kiln.no_grad():
        f(kiln.tensor([2.0, 2.0]))
    assert w.tolist() == [2.0, 4.0]
    with raises(kiln.KilnValueError, match="writes into a leaf tensor that requires grad"):
        f(kiln.tensor([2.0, 2.0]))
    assert w.tolist() == [2.0, 4.0]


def test_backward_inside_a_jitted_function_is_refused_and_leaves_grad_alone():
    # It left a traced value, with no data, in the weight's .grad: opt.step() and every later
    # read of it failed with "a value traced by kiln.jit has no data".
    w = kiln.nn.Parameter(kiln.tensor([1.0, 2.0]))

    @kiln.jit
    def step(x):
        loss = (x * w).sum()
        loss.backward()
        return loss

    with raises(kiln.KilnNotImplementedError, match=r"backward\(\) inside a function kiln.jit "
                                                    r"traces.*kiln.grad"):
        step(kiln.tensor([3.0, 4.0]))
    assert w.grad is None
    (kiln.tensor([3.0, 4.0]) * w).sum().backward()  # eagerly, as before
    assert w.grad.tolist() == [3.0, 4.0]
