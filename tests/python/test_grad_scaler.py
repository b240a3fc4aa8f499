"""kiln.amp.GradScaler (python/kiln/amp.py): float16 autocast training with gradient scaling
against PyTorch's GradScaler (scales, skipped steps, parameters, state dicts); and, without
PyTorch, exact numbers for a step skipped and the scale backed off by an inf or NaN gradient,
growth after growth_interval clean steps, unscale_ before clipping, several optimizers, the
forwarded step, nested outputs, a jitted scale(), checkpoints, the disabled pass-through, and
every misuse and bad argument."""

import collections
import types

import numpy as np
import pytest

import kiln
from conftest import raises
from kiln.errors import KilnError, KilnNotImplementedError, KilnTypeError, KilnValueError

GradScaler = kiln.amp.GradScaler
F = kiln.nn.functional
INF, NAN = float("inf"), float("nan")


def _parameter(*values):
    return kiln.nn.Parameter(kiln.tensor(np.array(values, np.float32)))


def _backward(scaler, w, *coefficients):
    """Clears ``w.grad`` and runs backward on the scaled ``sum(w * coefficients)``, whose
    gradient is ``coefficients`` times the scale."""
    w.grad = None
    scaler.scale((w * kiln.tensor(np.array(coefficients, np.float32))).sum()).backward()


def _iteration(scaler, opt, w, *coefficients):
    """One iteration: backward, step, update; whether the step ran."""
    _backward(scaler, w, *coefficients)
    before = w.numpy().copy()
    scaler.step(opt)
    scaler.update()
    return not np.array_equal(w.numpy(), before)


class _Recording:
    """An optimizer that records the calls of its step and returns a marker."""

    def __init__(self, *params):
        self.param_groups = [{"params": list(params)}]
        self.calls = []

    def step(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        return "stepped"


def test_an_inf_or_nan_gradient_skips_the_step_and_backs_off_the_scale():
    w = _parameter(1.0, 2.0)
    opt = kiln.optim.SGD([w], lr=0.5)
    scaler = GradScaler(init_scale=8.0, growth_interval=100)
    loss = (w * kiln.tensor([3.0, 4.0])).sum()
    scaled = scaler.scale(loss)
    assert float(scaled) == 8.0 * float(loss)
    scaled.backward()
    np.testing.assert_array_equal(w.grad.numpy(), [24.0, 32.0])
    scaler.step(opt)
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, 4.0])  # unscaled before the update
    np.testing.assert_array_equal(w.numpy(), [1.0 - 0.5 * 3.0, 2.0 - 0.5 * 4.0])
    scaler.update()
    assert scaler.get_scale() == 8.0 and scaler.state_dict()["_growth_tracker"] == 1
    before = w.numpy().copy()
    for bad, scale in [(INF, 4.0), (NAN, 2.0), (-INF, 1.0)]:
        _backward(scaler, w, bad, 1.0)
        assert scaler.step(opt) is None
        np.testing.assert_array_equal(w.numpy(), before)
        np.testing.assert_array_equal(w.grad.numpy()[1], 1.0)  # still unscaled
        scaler.update()
        assert scaler.get_scale() == scale and scaler.state_dict()["_growth_tracker"] == 0
    assert _iteration(scaler, opt, w, 2.0, 2.0)
    np.testing.assert_array_equal(w.numpy(), before - 0.5 * 2.0)


def test_the_scale_grows_after_growth_interval_clean_steps():
    w = _parameter(1.0)
    opt = kiln.optim.SGD([w], lr=0.01)
    scaler = GradScaler(init_scale=4.0, growth_interval=3)
    scales, trackers = [], []
    for _ in range(7):
        assert _iteration(scaler, opt, w, 1.0)
        scales.append(scaler.get_scale())
        trackers.append(scaler.state_dict()["_growth_tracker"])
    assert scales == [4.0 * 2.0 ** ((k + 1) // 3) for k in range(7)]
    assert trackers == [(k + 1) % 3 for k in range(7)]
    # An inf resets the count: three more clean steps are needed.
    assert not _iteration(scaler, opt, w, INF)
    assert scaler.get_scale() == scales[-1] / 2
    for k in range(3):
        _iteration(scaler, opt, w, 1.0)
        assert scaler.get_scale() == scales[-1] * (0.5 if k < 2 else 1.0)


def test_odd_factors_round_as_pytorchs_in_float64_then_float32():
    w = _parameter(1.0)
    opt = kiln.optim.SGD([w], lr=0.01)
    scaler = GradScaler(init_scale=3.0, growth_factor=1.7, backoff_factor=0.3, growth_interval=1)
    want = np.float32(3.0)
    for bad in [False, True, False, True, True, False]:
        _iteration(scaler, opt, w, INF if bad else 1.0)
        want = np.float32(np.float64(want) * (0.3 if bad else 1.7))
        assert scaler.get_scale() == float(want)


def test_growth_stops_short_of_float32_overflow():
    w = _parameter(1.0)
    opt = kiln.optim.SGD([w], lr=0.5)
    scaler = GradScaler(init_scale=2.0**127, growth_interval=1)
    assert _iteration(scaler, opt, w, 1.0)
    assert scaler.get_scale() == 2.0**127 and scaler.state_dict()["_growth_tracker"] == 0


def test_a_growth_interval_lowered_below_the_count_grows_at_the_next_clean_step():
    w = _parameter(1.0)
    opt = kiln.optim.SGD([w], lr=0.01)
    scaler = GradScaler(init_scale=4.0, growth_interval=5)
    for _ in range(3):
        _iteration(scaler, opt, w, 1.0)
    scaler.set_growth_interval(2)
    assert scaler.get_growth_interval() == 2
    _iteration(scaler, opt, w, 1.0)
    assert scaler.get_scale() == 8.0 and scaler.state_dict()["_growth_tracker"] == 0


def test_unscale_then_clip_then_step():
    w = _parameter(0.0, 0.0)
    opt = kiln.optim.SGD([w], lr=1.0)
    scaler = GradScaler(init_scale=2.0**10)
    _backward(scaler, w, 3.0, 4.0)
    np.testing.assert_array_equal(w.grad.numpy(), [3.0 * 2**10, 4.0 * 2**10])
    scaler.unscale_(opt)
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, 4.0])
    total = kiln.nn.utils.clip_grad_norm_([w], 1.0)
    assert float(total) == 5.0
    clipped = w.grad.numpy().copy()
    np.testing.assert_allclose(clipped, [0.6, 0.8], rtol=1e-6)
    scaler.step(opt)  # does not unscale again
    np.testing.assert_array_equal(w.grad.numpy(), clipped)
    np.testing.assert_array_equal(w.numpy(), -clipped)
    scaler.update()
    assert scaler.get_scale() == 2.0**10


def test_16_and_64_bit_gradients_other_than_float16_are_unscaled():
    scaler = GradScaler(init_scale=4.0)
    for dtype in [kiln.bfloat16, kiln.float64]:
        w = kiln.nn.Parameter(kiln.tensor([1.0, 2.0]).to(dtype))
        opt = kiln.optim.SGD([w], lr=1.0)
        scaler.scale((w * kiln.tensor([3.0, 5.0]).to(dtype)).sum()).backward()
        scaler.step(opt)
        assert w.grad.dtype == dtype
        np.testing.assert_array_equal(w.grad.to(kiln.float64).numpy(), [3.0, 5.0])
        np.testing.assert_array_equal(w.to(kiln.float64).numpy(), [-2.0, -3.0])
        scaler.update()


def test_each_optimizer_steps_on_its_own_check_and_update_sees_them_all():
    w1, w2 = _parameter(1.0), _parameter(1.0)
    opt1, opt2 = kiln.optim.SGD([w1], lr=1.0), kiln.optim.SGD([w2], lr=1.0)
    scaler = GradScaler(init_scale=16.0, growth_interval=1)
    scaler.scale((w1 * 2.0 + w2 * INF).sum()).backward()
    scaler.step(opt1)
    assert scaler.step(opt2) is None
    np.testing.assert_array_equal(w1.numpy(), [-1.0])
    np.testing.assert_array_equal(w2.numpy(), [1.0])
    scaler.update()
    assert scaler.get_scale() == 8.0
    opt1.zero_grad()
    opt2.zero_grad()
    scaler.scale((w1 * 2.0 + w2 * 2.0).sum()).backward()
    scaler.unscale_(opt1)  # one explicitly, one by step
    scaler.step(opt1)
    scaler.step(opt2)
    scaler.update()
    np.testing.assert_array_equal(w1.numpy(), [-3.0])
    np.testing.assert_array_equal(w2.numpy(), [-1.0])
    assert scaler.get_scale() == 16.0


def test_step_forwards_its_arguments_and_returns_the_optimizers_result():
    w = _parameter(1.0)
    opt = _Recording(w)
    scaler = GradScaler(init_scale=2.0)
    _backward(scaler, w, 1.0)
    assert scaler.step(opt, 1, lr=2) == "stepped"
    assert opt.calls == [((1,), {"lr": 2})]
    scaler.update()
    _backward(scaler, w, INF)
    assert scaler.step(opt, 1, lr=2) is None
    assert len(opt.calls) == 1


def test_scale_takes_nested_lists_and_tuples():
    scaler = GradScaler(init_scale=4.0)
    Pair = collections.namedtuple("Pair", "first second")
    a, b, c = kiln.tensor([1.0, 2.0]), kiln.tensor(3.0), kiln.tensor([[5.0]])
    out = scaler.scale([a, (b, [c]), Pair(a, b), ()])
    assert type(out) is list and type(out[1]) is tuple and type(out[1][1]) is list
    assert type(out[2]) is Pair and out[3] == ()
    np.testing.assert_array_equal(out[0].numpy(), [4.0, 8.0])
    assert float(out[1][0]) == 12.0 and float(out[2].second) == 12.0
    np.testing.assert_array_equal(out[1][1][0].numpy(), [[20.0]])
    assert out[0].dtype == kiln.float32
    assert scaler.scale(kiln.tensor([1.0], dtype=kiln.float64)).dtype == kiln.float64


def test_a_jitted_scale_follows_each_update():
    scaler = GradScaler(init_scale=4.0)
    scaled_sum = kiln.jit(lambda x: scaler.scale(x.sum()))
    x = kiln.tensor([1.0, 2.0])
    assert float(scaled_sum(x)) == 12.0
    w = _parameter(1.0)
    _backward(scaler, w, 1.0)
    scaler.step(kiln.optim.SGD([w], lr=1.0))
    scaler.update(new_scale=0.5)
    assert float(scaled_sum(x)) == 1.5


def test_update_sets_a_new_scale_and_keeps_the_count():
    w = _parameter(1.0)
    opt = kiln.optim.SGD([w], lr=0.01)
    scaler = GradScaler(init_scale=4.0, growth_interval=10)
    _iteration(scaler, opt, w, 1.0)
    _backward(scaler, w, 1.0)
    scaler.step(opt)
    scaler.update(32.0)
    assert scaler.get_scale() == 32.0 and scaler.state_dict()["_growth_tracker"] == 1
    scaler.update(kiln.tensor([0.25], dtype=kiln.float64))  # no step needed
    assert scaler.get_scale() == 0.25
    _iteration(scaler, opt, w, 1.0)
    assert scaler.get_scale() == 0.25 and scaler.state_dict()["_growth_tracker"] == 2


def test_state_dict_round_trip():
    w = _parameter(1.0)
    opt = kiln.optim.SGD([w], lr=0.01)
    scaler = GradScaler(init_scale=64.0, growth_factor=3.0, backoff_factor=0.25,
                        growth_interval=4)
    for c in [1.0, INF, 1.0, 1.0]:
        _iteration(scaler, opt, w, c)
    saved = scaler.state_dict()
    assert saved == {"scale": 16.0, "growth_factor": 3.0, "backoff_factor": 0.25,
                     "growth_interval": 4, "_growth_tracker": 2}
    assert type(saved["scale"]) is float and type(saved["_growth_tracker"]) is int
    restored = GradScaler()
    restored.load_state_dict(saved)  # before its first scale()
    assert restored.state_dict() == saved and restored.get_scale() == 16.0
    assert (restored.get_growth_factor(), restored.get_backoff_factor(),
            restored.get_growth_interval()) == (3.0, 0.25, 4)
    # Both go on alike: two more clean steps reach the growth interval.
    other = _parameter(1.0)
    other_opt = kiln.optim.SGD([other], lr=0.01)
    for _ in range(2):
        _iteration(scaler, opt, w, 1.0)
        _iteration(restored, other_opt, other, 1.0)
        assert restored.state_dict() == scaler.state_dict()
    assert scaler.get_scale() == 48.0
    # Loading into a scaler that has run writes its scale.
    restored.load_state_dict(saved)
    assert restored.state_dict() == saved


def test_settings_getters_and_setters():
    scaler = GradScaler(init_scale=2.0**16)
    assert scaler.is_enabled() and scaler.get_scale() == 2.0**16
    assert (scaler.get_growth_factor(), scaler.get_backoff_factor(),
            scaler.get_growth_interval()) == (2.0, 0.5, 2000)
    scaler.set_growth_factor(4)
    scaler.set_backoff_factor(0.125)
    scaler.set_growth_interval(1)
    assert (scaler.get_growth_factor(), scaler.get_backoff_factor(),
            scaler.get_growth_interval()) == (4.0, 0.125, 1)
    w = _parameter(1.0)
    opt = kiln.optim.SGD([w], lr=0.01)
    _iteration(scaler, opt, w, 1.0)
    assert scaler.get_scale() == 2.0**18
    _iteration(scaler, opt, w, INF)
    assert scaler.get_scale() == 2.0**15


def test_disabled_is_a_pass_through():
    scaler = GradScaler(enabled=False, init_scale=8.0)
    w = _parameter(1.0)
    opt = _Recording(w)
    loss = (w * INF).sum()
    assert scaler.scale(loss) is loss
    outputs = [loss, (loss,)]
    assert scaler.scale(outputs) is outputs
    loss.backward()
    scaler.unscale_(opt)  # nothing: not even the check that scale() ran
    assert np.isinf(w.grad.numpy()).all()
    assert scaler.step(opt, 3, closure=None) == "stepped"  # an inf gradient steps
    assert scaler.step(opt) == "stepped"  # twice too
    assert opt.calls == [((3,), {"closure": None}), ((), {})]
    scaler.update()
    scaler.update(new_scale=4.0)
    assert not scaler.is_enabled() and scaler.get_scale() == 1.0
    assert scaler.state_dict() == {}
    scaler.load_state_dict({})
    assert scaler.get_scale() == 1.0 and scaler.state_dict() == {}
    assert scaler.get_growth_factor() == 2.0


def test_a_disabled_scaler_trains_as_no_scaler():
    w, v = _parameter(1.0, -1.0), _parameter(1.0, -1.0)
    scaler = GradScaler(enabled=False)
    opt, plain = kiln.optim.SGD([w], lr=0.1), kiln.optim.SGD([v], lr=0.1)
    for _ in range(2):
        _iteration(scaler, opt, w, 0.5, 0.25)
        plain.zero_grad()
        (v * kiln.tensor([0.5, 0.25])).sum().backward()
        plain.step()
    np.testing.assert_array_equal(w.numpy(), v.numpy())


@pytest.mark.parametrize("kwargs, error, message", [
    ({"device": "cuda"}, KilnValueError,
     r"GradScaler: expected device 'cpu' \(Kiln runs on the CPU\), got 'cuda'"),
    ({"enabled": 1}, KilnTypeError, "GradScaler: enabled must be a bool, got int 1"),
    ({"init_scale": 0.0}, KilnValueError,
     "expected init_scale to be a finite number > 0, got 0.0"),
    ({"init_scale": INF}, KilnValueError, "expected init_scale to be a finite number > 0"),
    ({"init_scale": "1"}, KilnTypeError, "init_scale must be a real number"),
    ({"growth_factor": 1.0}, KilnValueError,
     "expected growth_factor to be a finite number > 1, got 1.0"),
    ({"growth_factor": None}, KilnTypeError, "growth_factor must be a real number"),
    ({"backoff_factor": 1.0}, KilnValueError, r"expected backoff_factor to be in \(0, 1\)"),
    ({"backoff_factor": 0}, KilnValueError, r"expected backoff_factor to be in \(0, 1\), got 0"),
    ({"growth_interval": 0}, KilnValueError, "growth_interval must be at least 1, got 0"),
    ({"growth_interval": 2.5}, KilnTypeError, "growth_interval must be an int"),
])
def test_constructor_errors(kwargs, error, message):
    with raises(error, match=message):
        GradScaler(**kwargs)


@pytest.mark.parametrize("setter, value, error, message", [
    ("set_growth_factor", 0.5, KilnValueError,
     "GradScaler.set_growth_factor: expected growth_factor to be a finite number > 1"),
    ("set_backoff_factor", 2, KilnValueError,
     r"GradScaler.set_backoff_factor: expected backoff_factor to be in \(0, 1\)"),
    ("set_backoff_factor", True, KilnTypeError, "backoff_factor must be a real number"),
    ("set_growth_interval", 0, KilnValueError,
     "GradScaler.set_growth_interval: growth_interval must be at least 1"),
])
def test_setter_errors_change_nothing(setter, value, error, message):
    scaler = GradScaler()
    before = (scaler.get_growth_factor(), scaler.get_backoff_factor(),
              scaler.get_growth_interval())
    with raises(error, match=message):
        getattr(scaler, setter)(value)
    assert (scaler.get_growth_factor(), scaler.get_backoff_factor(),
            scaler.get_growth_interval()) == before


def _fresh(scaled=True):
    """A scaler (scale 4), an SGD optimizer and its parameter, with the gradient of a scaled loss
    (``scaled``) or of an unscaled one."""
    w = _parameter(1.0, 2.0)
    scaler = GradScaler(init_scale=4.0)
    loss = (w * kiln.tensor([1.0, 3.0])).sum()
    (scaler.scale(loss) if scaled else loss).backward()
    return scaler, kiln.optim.SGD([w], lr=1.0), w


def _half_gradient(scaler, opt, w):
    half = kiln.nn.Parameter(kiln.tensor([1.0, 2.0]).to(kiln.float16))
    scaler.scale(half.sum()).backward()
    scaler.unscale_(kiln.optim.SGD([half], lr=1.0))


def _no_gradient(scaler, opt, w):
    opt.zero_grad()
    scaler.step(opt)


def _numpy_gradient(scaler, opt, w):
    scaler.step(_Recording(types.SimpleNamespace(grad=np.ones(2, np.float32))))


def _twice(method):
    def call(scaler, opt, w):
        getattr(scaler, method)(opt)
        getattr(scaler, method)(opt)
    return call


def _unscale_after_step(scaler, opt, w):
    scaler.step(opt)
    scaler.unscale_(opt)


_TWICE_UNSCALE, _TWICE_STEP = _twice("unscale_"), _twice("step")
_UNSCALING_FIRST = (_TWICE_UNSCALE, _TWICE_STEP, _unscale_after_step)


@pytest.mark.parametrize("call, error, message", [
    (lambda s, o, w: s.scale("loss"), KilnTypeError,
     r"GradScaler.scale: expected a kiln tensor or a \(nested\) list or tuple of them, got str"),
    (lambda s, o, w: s.scale([w.sum(), (np.ones(2),)]), KilnTypeError, "got ndarray"),
    (lambda s, o, w: s.scale({"loss": w.sum()}), KilnTypeError, "got dict"),
    (_TWICE_UNSCALE, KilnError, r"GradScaler.unscale_: unscale_\(\) has already been called "
     r"on this optimizer since the last update\(\)"),
    (_unscale_after_step, KilnError, r"GradScaler.unscale_: unscale_\(\) called after step\(\)"),
    (_TWICE_STEP, KilnError, r"GradScaler.step: step\(\) has already been called on this "
     r"optimizer since the last update\(\); call scaler.update\(\)"),
    (_no_gradient, KilnError, "no parameter of this optimizer has a gradient"),
    (lambda s, o, w: s.update(), KilnError,
     r"GradScaler.update: no gradients were checked since the last update\(\)"),
    (lambda s, o, w: s.step(o, closure=lambda: None), KilnNotImplementedError,
     "GradScaler.step: a closure is not supported while the scaler is enabled"),
    (lambda s, o, w: s.step(o, lambda: None), KilnNotImplementedError, "a closure"),
    (_half_gradient, KilnValueError, r"GradScaler.unscale_: the gradient of parameter 0 of "
     r"param_groups\[0\] is float16, expected float32"),
    (_numpy_gradient, KilnTypeError, r"GradScaler.step: the gradient of parameter 0 of "
     r"param_groups\[0\] is a ndarray, expected a kiln tensor"),
    (lambda s, o, w: s.step("opt"), KilnTypeError,
     r"GradScaler.step: expected an optimizer \(with param_groups and step\(\), as "
     r"kiln.optim's\), got str"),
    (lambda s, o, w: s.unscale_(object()), KilnTypeError, "expected an optimizer"),
    (lambda s, o, w: s.update(new_scale=0.0), KilnValueError,
     "GradScaler.update: expected new_scale to be a finite number > 0, got 0.0"),
    (lambda s, o, w: s.update(new_scale="2"), KilnTypeError, "new_scale must be a real number"),
    (lambda s, o, w: s.update(new_scale=kiln.tensor([1.0, 2.0])), KilnValueError,
     r"expected new_scale to be a number or a floating tensor of one element that does not "
     r"require grad, got a float32\[2\] tensor"),
    (lambda s, o, w: s.update(new_scale=kiln.tensor([2.0]).requires_grad_()), KilnValueError,
     r"got a float32\[1\] tensor requiring grad"),
    (lambda s, o, w: s.update(new_scale=kiln.tensor([2])), KilnValueError,
     r"got a int64\[1\] tensor"),
])
def test_misuse_errors_change_nothing(call, error, message):
    scaler, opt, w = _fresh()
    with raises(error, match=message):
        call(scaler, opt, w)
    assert scaler.get_scale() == 4.0
    if w.grad is not None:
        # Scaled, or unscaled once by a call before the failing one.
        unscaled = call in _UNSCALING_FIRST
        np.testing.assert_array_equal(w.grad.numpy(), [1.0, 3.0] if unscaled else [4.0, 12.0])


@pytest.mark.parametrize("method", ["unscale_", "step", "update"])
def test_methods_before_any_scale_are_errors(method):
    scaler, opt, w = _fresh(scaled=False)
    with raises(KilnError, match=rf"GradScaler.{method}: scale\(\) has not been called yet, so no "
                rf"gradient is scaled; call scaler.scale\(loss\).backward\(\) before "
                rf"{method}\(\)"):
        getattr(scaler, method)(*([] if method == "update" else [opt]))
    np.testing.assert_array_equal(w.grad.numpy(), [1.0, 3.0])


@pytest.mark.parametrize("make, error, message", [
    (lambda saved: list(saved.items()), KilnTypeError,
     "GradScaler.load_state_dict: expected a dict .*, got list"),
    (lambda saved: {}, KilnValueError,
     "GradScaler.load_state_dict: the state dict is empty, as a disabled GradScaler's is"),
    (lambda saved: {"scale": 2.0}, KilnValueError,
     r"expected the keys \['scale', 'growth_factor', 'backoff_factor', 'growth_interval', "
     r"'_growth_tracker'\], got \['scale'\]"),
    (lambda saved: {**saved, "extra": 1}, KilnValueError,
     r"got \['_growth_tracker', 'backoff_factor', 'extra', 'growth_factor', 'growth_interval', "
     r"'scale'\]"),
    (lambda saved: {**saved, "scale": -1.0}, KilnValueError,
     "expected scale to be a finite number > 0, got -1.0"),
    (lambda saved: {**saved, "_growth_tracker": -1}, KilnValueError,
     "_growth_tracker must be at least 0, got -1"),
    (lambda saved: {**saved, "growth_interval": "2"}, KilnTypeError,
     "growth_interval must be an int"),
    (lambda saved: {**saved, "backoff_factor": 1.5}, KilnValueError,
     r"expected backoff_factor to be in \(0, 1\)"),
])
def test_load_state_dict_errors_change_nothing(make, error, message):
    scaler = GradScaler(init_scale=8.0, growth_interval=5)
    before = scaler.state_dict()
    with raises(error, match=message):
        scaler.load_state_dict(make({**before, "scale": 2.0, "_growth_tracker": 3}))
    assert scaler.state_dict() == before


# ----------------------------------------------------------------------------------------------
# Against PyTorch


def _copy_of(ours, theirs):
    ours.load_state_dict({k: kiln.tensor(v.detach().numpy()) for k, v in
                          theirs.state_dict().items()})


def test_float16_training_matches_pytorchs_grad_scaler(rng):
    torch = pytest.importorskip("torch")
    ours = kiln.nn.Sequential(kiln.nn.Linear(8, 16), kiln.nn.ReLU(), kiln.nn.Linear(16, 4))
    theirs = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    _copy_of(ours, theirs)
    opt = kiln.optim.SGD(ours.parameters(), lr=0.1, momentum=0.9)
    their_opt = torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=0.9)
    # A scale large enough to overflow float16 at first, and growth every other clean step.
    scaler = GradScaler("cpu", init_scale=2.0**24, growth_interval=2)
    their_scaler = torch.amp.GradScaler("cpu", init_scale=2.0**24, growth_interval=2)
    skipped, their_skipped = [], []
    for step in range(12):
        x = rng.standard_normal((6, 8)).astype(np.float32)
        target = rng.integers(0, 4, 6)
        before = [p.numpy().copy() for p in ours.parameters()]
        their_before = [p.detach().clone() for p in theirs.parameters()]
        opt.zero_grad()
        with kiln.autocast("cpu", dtype=kiln.float16):
            logits = ours(kiln.tensor(x))
            loss = F.cross_entropy(logits, kiln.tensor(target))
        assert logits.dtype == kiln.float16 and loss.dtype == kiln.float32
        scaler.scale(loss).backward()
        their_opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            their_loss = torch.nn.functional.cross_entropy(theirs(torch.tensor(x)),
                                                           torch.tensor(target))
        their_scaler.scale(their_loss).backward()
        if step % 2:  # clip every other step: unscale_ by hand, then step
            scaler.unscale_(opt)
            kiln.nn.utils.clip_grad_norm_(ours.parameters(), 0.5)
            their_scaler.unscale_(their_opt)
            torch.nn.utils.clip_grad_norm_(theirs.parameters(), 0.5)
        scaler.step(opt)
        their_scaler.step(their_opt)
        scaler.update()
        their_scaler.update()
        skipped.append(all(np.array_equal(p.numpy(), b) for p, b in
                           zip(ours.parameters(), before)))
        their_skipped.append(all(torch.equal(p, b) for p, b in
                                 zip(theirs.parameters(), their_before)))
        assert scaler.state_dict() == their_scaler.state_dict(), step
        for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
            np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=2e-2, atol=2e-3,
                                       err_msg=f"{name} after step {step}")
    assert skipped == their_skipped
    assert any(skipped) and not all(skipped)


def test_the_scale_sequence_matches_pytorchs_with_odd_factors():
    torch = pytest.importorskip("torch")
    settings = dict(init_scale=3.0, growth_factor=1.7, backoff_factor=0.3, growth_interval=2)
    scaler, their_scaler = GradScaler(**settings), torch.amp.GradScaler("cpu", **settings)
    w, theirs = _parameter(1.0, 2.0), torch.tensor([1.0, 2.0], requires_grad=True)
    opt, their_opt = kiln.optim.SGD([w], lr=0.1), torch.optim.SGD([theirs], lr=0.1)
    for bad in [None, INF, None, None, None, NAN, None, None, None, None, -INF, None]:
        coefficients = [0.5, 0.25 if bad is None else bad]
        _backward(scaler, w, *coefficients)
        their_opt.zero_grad()
        their_scaler.scale((theirs * torch.tensor(coefficients)).sum()).backward()
        assert (scaler.step(opt) is None) == (their_scaler.step(their_opt) is None)
        scaler.update()
        their_scaler.update()
        assert scaler.get_scale() == their_scaler.get_scale()
        assert scaler.state_dict() == their_scaler.state_dict()
        np.testing.assert_allclose(w.numpy(), theirs.detach().numpy(), rtol=1e-6)


def test_state_dicts_load_across_frameworks():
    torch = pytest.importorskip("torch")
    theirs = torch.amp.GradScaler("cpu", init_scale=128.0, growth_factor=1.5,
                                  backoff_factor=0.25, growth_interval=7)
    ours = GradScaler()
    ours.load_state_dict(theirs.state_dict())
    assert ours.state_dict() == theirs.state_dict()
    ours.load_state_dict({**ours.state_dict(), "scale": 32.0, "_growth_tracker": 3})
    back = torch.amp.GradScaler("cpu")
    back.load_state_dict(ours.state_dict())
    assert back.state_dict() == ours.state_dict()
    disabled = torch.amp.GradScaler("cpu", enabled=False).state_dict()
    with raises(KilnValueError, match="empty"):
        ours.load_state_dict(disabled)
