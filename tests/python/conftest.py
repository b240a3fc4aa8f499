"""Shared pytest fixtures and tolerances for Kiln's Python suite."""

import contextlib
import os
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest

# The suite runs in the asynchronous "2stage" pipeline unless told otherwise: errors surface at
# sync points there, which the tests must handle, while the default ("sync") raises at the call.
os.environ.setdefault("KILN_PIPELINE", "2stage")
# Debug mode: the jit verifies the graph after every pass, so a pass that breaks a graph in any
# test is named there.
os.environ.setdefault("KILN_DEBUG", "1")

import kiln  # noqa: E402  (after the pipeline mode is chosen)

# Custom-op builds in the tests do not start background precompiled-header builds (2 to 3 s of
# CPU each); the test of that feature turns it back on.
os.environ["KILN_EXTENSION_PCH"] = "0"

# Tolerances per dtype for comparisons against NumPy (rtol, atol). 16-bit floats are computed in
# float32 and rounded once, so their bound is a few units in their last place.
TOLERANCES = {
    kiln.float64: (1e-12, 1e-12),
    kiln.float32: (1e-5, 1e-6),
    kiln.float16: (2e-3, 1e-3),
    kiln.bfloat16: (1.6e-2, 1e-2),
}

FLOAT_DTYPES = [kiln.float32, kiln.float64, kiln.float16, kiln.bfloat16]
INT_DTYPES = [kiln.int8, kiln.uint8, kiln.int16, kiln.int32, kiln.int64]
ALL_DTYPES = [kiln.bool_] + INT_DTYPES + FLOAT_DTYPES

_NUMPY_NAMES = {kiln.bfloat16: "float32"}


def numpy_dtype(dtype):
    """The NumPy dtype that holds a kiln dtype's values (float32 for bfloat16)."""
    return np.dtype(_NUMPY_NAMES.get(dtype, dtype.name))


def random_array(shape, dtype, rng, low=-3.0, high=3.0):
    """Random values representable in `dtype`, as a NumPy array of numpy_dtype(dtype)."""
    if dtype == kiln.bool_:
        return rng.random(shape) > 0.5
    if not dtype.is_floating_point:
        info = np.iinfo(dtype.name)
        lo, hi = max(info.min, int(low * 10)), min(info.max, int(high * 10))
        return rng.integers(lo, hi + 1, size=shape).astype(dtype.name)
    values = rng.uniform(low, high, size=shape).astype(np.float32)
    if dtype == kiln.bfloat16:
        return kiln.tensor(values, dtype=kiln.bfloat16).numpy()  # round to bfloat16 values
    return values.astype(numpy_dtype(dtype))


def assert_close(actual, expected, dtype=None):
    """Compares a kiln tensor (or array) with a NumPy result using the dtype's tolerance."""
    a = actual.numpy() if isinstance(actual, kiln.Tensor) else np.asarray(actual)
    e = np.asarray(expected)
    assert a.shape == e.shape, f"shape {a.shape} != expected {e.shape}"
    dtype = dtype or (actual.dtype if isinstance(actual, kiln.Tensor) else None)
    if dtype in TOLERANCES:
        rtol, atol = TOLERANCES[dtype]
        np.testing.assert_allclose(a.astype(np.float64), e.astype(np.float64), rtol=rtol,
                                   atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(a, e)


def close(actual, expected, rtol=1e-5, atol=1e-6):
    """Compares a kiln tensor with a NumPy result in float64 at the given tolerances."""
    np.testing.assert_allclose(np.asarray(actual.numpy(), dtype=np.float64),
                               np.asarray(expected, dtype=np.float64), rtol=rtol, atol=atol)


@contextlib.contextmanager
def raises(expected, match=None):
    """pytest.raises for Kiln ops, which run asynchronously: the error may surface at the call or
    at the next sync point, so the block ends with one. A failure left over from code before the
    block fails the test at its start."""
    kiln.runtime.synchronize()
    with pytest.raises(expected, match=match) as info:
        yield info
        kiln.runtime.synchronize()


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture
def sync_pipeline():
    """The synchronous pipeline for one test: an error is raised by the call that made it."""
    previous = kiln.runtime.get_pipeline()
    kiln.runtime.set_pipeline("sync")
    yield
    kiln.runtime.set_pipeline(previous)


@pytest.fixture
def torch():
    """PyTorch, for tests that compare with it (skipped where it is not installed)."""
    return pytest.importorskip("torch")


def t(array, dtype=None):
    """A kiln tensor of ``array``'s values (in ``dtype`` when given)."""
    return kiln.tensor(np.asarray(array), dtype=dtype)


def torch_twin(torch, array, dtype, requires_grad=True):
    """``array``'s values as a torch tensor of kiln ``dtype``'s torch dtype (through float64, so
    bfloat16 values arrive exact), requiring grad unless told otherwise."""
    twin = torch.tensor(np.asarray(array, np.float64)).to(getattr(torch, dtype.name))
    return twin.requires_grad_() if requires_grad else twin



def check_padding_cell(cell, spec, shape, rng):
    """A padding cell against np.pad: ``spec`` holds np.pad's keyword arguments, with "pad" the
    (before, after) widths of the trailing dims. The gradient sums the upstream gradient over
    each input element's copies: the padded flat indices of the input say where each output
    element came from (-1: the constant)."""
    v = rng.standard_normal(shape)
    spec = dict(spec)
    widths = [(0, 0)] * (len(shape) - len(spec["pad"])) + spec.pop("pad")
    want = np.pad(v, widths, **spec)
    x = t(v).requires_grad_()
    out = cell(x)
    close(out, want, rtol=0, atol=0)
    upstream = rng.standard_normal(want.shape)
    (grad,) = kiln.autograd.grad(out, [x], t(upstream))
    if spec["mode"] == "constant":
        spec["constant_values"] = -1
    index = np.pad(np.arange(v.size).reshape(shape), widths, **spec)
    want_grad = np.bincount(index[index >= 0].ravel(), upstream[index >= 0].ravel(), v.size)
    close(grad, want_grad.reshape(shape), rtol=1e-12, atol=1e-12)

def check_torch(actual, expected, dtype, what, scale_atol=False):
    """``actual`` (kiln) against ``expected`` (torch) at ``dtype``'s tolerance, NaNs equal; with
    ``scale_atol`` the absolute part scales with the largest expected magnitude (for gradients
    whose terms cancel)."""
    rtol, atol = TOLERANCES[dtype]
    want = expected.detach().double().numpy()
    if scale_atol:
        atol *= max(1.0, float(np.nanmax(np.abs(want), initial=0.0)))
    np.testing.assert_allclose(np.asarray(actual.numpy(), np.float64), want, rtol=rtol,
                               atol=atol, equal_nan=True, err_msg=what)


def check_channel_dropout(x, y, channel_dims, p):
    """``y``, channel dropout of ``x`` (ones, requiring grad) with probability ``p``: each channel
    (the first ``channel_dims`` dimensions index one) all zeros or all 1 / (1 - p), about a ``p``
    share of them zero, and the gradient of y.sum() the scaled mask."""
    values = y.detach().numpy()
    channels = values.reshape(tuple(x.shape[:channel_dims]) + (-1,))
    assert np.all(channels == channels[..., :1])  # one draw per channel
    assert set(np.unique(channels).tolist()) == {0.0, float(np.float32(1 / (1 - p)))}
    assert abs((channels[..., 0] == 0).mean() - p) < 0.06
    (grad,) = kiln.autograd.grad(y.sum(), [x])
    np.testing.assert_array_equal(grad.numpy(), values)  # the gradient is the scaled mask


def check_cell_against_torch(torch, ours, theirs, v, rng, scale_atol=False):
    """A float64 kiln cell against its PyTorch twin (the same parameters) on input ``v``: the
    value, and the gradients of the input and of every parameter for a random upstream gradient.
    Returns the two inputs (kiln, torch)."""
    x, tx = t(v).requires_grad_(), torch.tensor(v, requires_grad=True)
    out, want = ours(x), theirs(tx)
    check_torch(out, want, kiln.float64, "value")
    upstream = rng.uniform(0.5, 2, size=tuple(want.shape))
    grads = kiln.autograd.grad(out, [x] + list(ours.parameters()), t(upstream))
    wants = torch.autograd.grad(want, [tx] + list(theirs.parameters()), torch.tensor(upstream))
    names = ["input"] + [name for name, _ in theirs.named_parameters()]
    for name, grad, expected in zip(names, grads, wants):
        check_torch(grad, expected, kiln.float64, f"gradient of {name}", scale_atol=scale_atol)
    return x, tx


EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples" / "custom_op"


def write(path, text):
    """Writes ``text`` (dedented) to ``path`` (a source file of a custom op); returns the path."""
    path.write_text(textwrap.dedent(text))
    return str(path)


def private_dir(path):
    """``path`` made a folder only its owner may use (an extension cache must be one)."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


@pytest.fixture(scope="session")
def extension_cache(tmp_path_factory):
    """A private cache folder shared by the session's custom-op builds (one compile each)."""
    path = tmp_path_factory.mktemp("kiln_extensions")
    path.chmod(0o700)
    return path


@pytest.fixture(scope="session")
def example_ops_builder(extension_cache):
    """examples/custom_op/*.cpp built once as one extension (a parallel multi-source build; -O0,
    which compiles faster and is plenty for checking results)."""
    sources = sorted(str(p) for p in EXAMPLES_DIR.glob("*.cpp"))
    builder = kiln.ops.CustomOpBuilder("examples", sources, build_dir=extension_cache, debug=True)
    builder.load()
    return builder


@pytest.fixture(scope="session")
def example_ops(example_ops_builder):
    return example_ops_builder.load()


REPO_DIR = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def build_plugin(tmp_path_factory):
    """Builds a plugin the way a user does -- CMake, find_package(Kiln), kiln_add_plugin -- and
    returns the path of lib<name>.so. Usage: build_plugin("name", [source, ...])."""
    def build(name, sources):
        folder = tmp_path_factory.mktemp(name)
        listed = " ".join(f'"{Path(s).resolve()}"' for s in sources)
        (folder / "CMakeLists.txt").write_text(
            "cmake_minimum_required(VERSION 3.18)\n"
            f"project({name} LANGUAGES CXX)\n"
            "find_package(Kiln REQUIRED)\n"
            f"kiln_add_plugin({name} SOURCES {listed})\n")
        build_dir = folder / "build"
        for command in (["cmake", "-S", str(folder), "-B", str(build_dir), "-G", "Ninja",
                         "-DCMAKE_BUILD_TYPE=Release", f"-DKiln_DIR={kiln.get_cmake_dir()}"],
                        ["cmake", "--build", str(build_dir)]):
            done = subprocess.run(command, capture_output=True, text=True)
            assert done.returncode == 0, done.stdout + done.stderr
        return build_dir / f"lib{name}.so"
    return build


@pytest.fixture(scope="session")
def jit_test_backends(build_plugin):
    """The jit's test backends (tests/cpp/jit/plugins/jit_test_backends.cc), registered:
    jit_plugin_backend, jit_plugin_elementwise, jit_plugin_failing, jit_plugin_throwing,
    jit_plugin_flattening, jit_plugin_widening."""
    path = build_plugin("jit_test_backends",
                        [REPO_DIR / "tests" / "cpp" / "jit" / "plugins" / "jit_test_backends.cc"])
    names = PluginBackends(["jit_plugin_backend", "jit_plugin_elementwise", "jit_plugin_failing",
                            "jit_plugin_throwing", "jit_plugin_flattening", "jit_plugin_widening"])
    names.path = path
    for name in names:
        if name not in kiln.graph.list_backends():
            kiln.graph.register_custom_backend(name, path)
    return names


class PluginBackends(list):
    """The names of a plugin's backends, with the plugin's ``path``."""

    path = None


class TiedLinears(kiln.nn.Cell):
    """An encoder and a decoder sharing one weight matrix (dec.weight = enc.weight): the tied
    model the copy / pickle and state_dict tests share."""

    def __init__(self):
        super().__init__()
        self.enc = kiln.nn.Linear(3, 3)
        self.dec = kiln.nn.Linear(3, 3)
        self.dec.weight = self.enc.weight

    def construct(self, x):
        return self.dec(kiln.mint.tanh(self.enc(x)))


def sgd_at_rates(bases):
    """An SGD whose parameter groups (one float64 parameter each) start at the rates ``bases``:
    the optimizer the scheduler tests drive."""
    from kiln import nn, optim
    groups = [{"params": [nn.Parameter(kiln.mint.zeros(3, dtype=kiln.float64))], "lr": lr}
              for lr in bases]
    return optim.SGD(groups, lr=bases[0])


def torch_sgd_at_rates(torch, bases):
    """PyTorch's twin of sgd_at_rates."""
    groups = [{"params": [torch.zeros(3, dtype=torch.float64, requires_grad=True)], "lr": lr}
              for lr in bases]
    return torch.optim.SGD(groups, lr=bases[0])


def check_schedule_against_torch(torch, build, bases, steps):
    """``build(scheduler_module, optimizer)`` made for Kiln and for PyTorch over groups at the
    rates ``bases`` and stepped ``steps`` times: the groups' rates, get_last_lr() and, where
    PyTorch's scheduler has one (ChainedScheduler has none), last_epoch equal PyTorch's at every
    step."""
    from kiln.optim import lr_scheduler
    opt, theirs = sgd_at_rates(bases), torch_sgd_at_rates(torch, bases)
    sched, reference = build(lr_scheduler, opt), build(torch.optim.lr_scheduler, theirs)
    for step in range(steps + 1):
        if step:
            theirs.step()  # no gradients: nothing moves, but PyTorch does not warn of the order
            sched.step()
            reference.step()
        assert_rates(group_rates(opt), group_rates(theirs))
        assert_rates(sched.get_last_lr(), reference.get_last_lr())
        if hasattr(reference, "last_epoch"):
            assert sched.last_epoch == reference.last_epoch, f"step {step}"


def group_rates(opt):
    """The rates of ``opt``'s parameter groups, in order."""
    return [g["lr"] for g in opt.param_groups]


def assert_rates(actual, expected):
    """Scheduler rates equal to their closed forms, to float64 rounding."""
    assert actual == pytest.approx(expected, rel=1e-12, abs=1e-15)
