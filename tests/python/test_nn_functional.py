"""kiln.nn.functional (kiln/nn/functional.py) against torch.nn.functional: the signatures (names,
order, defaults, keyword-only arguments), and values and gradients of every function called with
the same positional arguments as PyTorch's, over a few shapes and dtypes; batch_norm's running
statistics and the in-place variants. The torch-free checks are in
test_nn_functional_reference.py."""

import inspect
import warnings

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from conftest import FLOAT_DTYPES, check_torch, random_array, t, torch_twin
from test_nn_functional_reference import INPLACE

mint = kiln.mint


def torch_signature(torch, name):
    """[(name, default, keyword-only or None where unknown)] of torch.nn.functional's ``name``:
    from inspect, or for builtins (and boolean dispatchers) from the first line of the
    docstring, which shows names and defaults but not the keyword-only ones: those come from the
    ATen op of that name, when it has one."""
    fn = getattr(torch.nn.functional, name)
    try:
        signature = inspect.signature(fn)
        if all(p.kind != p.VAR_POSITIONAL for p in signature.parameters.values()):
            return [(p.name, p.default, p.kind == p.KEYWORD_ONLY)
                    for p in signature.parameters.values()]
    except ValueError:
        pass
    doc = fn.__doc__
    start = doc.index(name + "(") + len(name) + 1
    depth, end = 1, start
    while depth:
        depth += {"(": 1, ")": -1}.get(doc[end], 0)
        end += 1
    namespace = {}
    exec(f"def f({doc[start:end - 1]}): pass", namespace)  # noqa: S102  (PyTorch's own text)
    parameters = list(inspect.signature(namespace["f"]).parameters.values())
    op = getattr(torch.ops.aten, name, None)
    schema = getattr(op, "default", None)
    arguments = schema._schema.arguments if schema is not None else []
    keyword_only = ([a.kwarg_only for a in arguments] if len(arguments) == len(parameters)
                    else [None] * len(parameters))
    return [(p.name, p.default, k) for p, k in zip(parameters, keyword_only)]


@pytest.mark.parametrize("name", F.__all__)
def test_signature_is_pytorchs(torch, name):
    theirs = torch_signature(torch, name)
    ours = inspect.signature(getattr(F, name)).parameters.values()
    assert [(p.name, p.default) for p in ours] == [(n, d) for n, d, _ in theirs]
    for p, (_, _, keyword_only) in zip(ours, theirs):
        if keyword_only is not None:
            assert (p.kind == p.KEYWORD_ONLY) == keyword_only, p.name


# ------------------------------------------------------------------------------------------------
# Values and gradients


class T:
    """A tensor argument: ``kind`` "float" (uniform in [low, high]), "edges" (that, plus kinks,
    large values and NaN), "prob" (in (0, 1)), "logprob" (log-softmax rows), "index" (int64 in
    [0, high)) or "bool"; ``grad`` whether its gradient is compared."""

    def __init__(self, *shape, kind="float", low=-3.0, high=3.0, grad=True):
        self.shape, self.kind, self.low, self.high = shape, kind, low, high
        self.grad = grad and kind not in ("index", "bool")

    def values(self, dtype, rng):
        if self.kind == "index":
            return rng.integers(0, self.high, size=self.shape)
        if self.kind == "bool":
            return rng.random(self.shape) > 0.3
        if self.kind == "prob":
            values = rng.uniform(0.05, 0.95, size=self.shape)
        elif self.kind == "logprob":
            values = rng.normal(size=self.shape)
            values = values - np.log(np.exp(values).sum(-1, keepdims=True))
        else:
            values = random_array(self.shape, dtype, rng, self.low, self.high)
        if self.kind == "edges":
            values = np.concatenate([values, [0.0, -3.0, 3.0, 6.0, -6.0, 20.0, 25.0, -20.0,
                                              60.0, -60.0, np.nan]])
        return t(values, kiln.float64).to(dtype).numpy().astype(np.float64)

    def kiln(self, values, dtype):
        if self.kind in ("index", "bool"):
            return t(values)
        return t(values, kiln.float64).to(dtype)

    def torch(self, torch, values, dtype):
        if self.kind in ("index", "bool"):
            return torch.tensor(values)
        return torch_twin(torch, values, dtype, self.grad)


class Dtype:
    """A dtype argument, given to each library as its own."""

    def __init__(self, dtype):
        self.dtype = dtype


ALL, WIDE = FLOAT_DTYPES, [kiln.float32, kiln.float64]

# id -> (name, positional arguments, keyword arguments, dtypes)
CASES = {
    "relu": ("relu", [T(50, kind="edges")], {}, ALL),
    "relu6": ("relu6", [T(50, kind="edges")], {}, ALL),
    "leaky_relu": ("leaky_relu", [T(50, kind="edges"), 0.2], {}, ALL),
    "elu": ("elu", [T(50, kind="edges"), 0.5], {}, ALL),
    "selu": ("selu", [T(50, kind="edges")], {}, ALL),
    # alpha 0.5: PyTorch's celu gradient scales by 1 / alpha rounded to float32.
    "celu": ("celu", [T(50, kind="edges"), 0.5], {}, ALL),
    "gelu": ("gelu", [T(50, kind="edges")], {}, ALL),
    "gelu-tanh": ("gelu", [T(50, kind="edges")], {"approximate": "tanh"}, ALL),
    "silu": ("silu", [T(50, kind="edges")], {}, ALL),
    "mish": ("mish", [T(50, kind="edges")], {}, ALL),
    "sigmoid": ("sigmoid", [T(50, kind="edges")], {}, ALL),
    "tanh": ("tanh", [T(50, kind="edges")], {}, ALL),
    "softplus": ("softplus", [T(50, kind="edges"), 2.0, 5.0], {}, ALL),
    "softsign": ("softsign", [T(50, kind="edges")], {}, ALL),
    "tanhshrink": ("tanhshrink", [T(50, kind="edges")], {}, ALL),
    "hardtanh": ("hardtanh", [T(50, kind="edges"), -0.5, 2.0], {}, ALL),
    "hardswish": ("hardswish", [T(50, kind="edges", low=-5, high=5)], {}, ALL),
    # Not float64: PyTorch's gradient there is 1/6 rounded to float32.
    "hardsigmoid": ("hardsigmoid", [T(50, kind="edges", low=-5, high=5)], {},
                    [kiln.float32, kiln.float16, kiln.bfloat16]),
    "logsigmoid": ("logsigmoid", [T(50, kind="edges")], {}, ALL),
    "threshold": ("threshold", [T(50, kind="edges"), 0.5, -2.0], {}, ALL),
    "glu": ("glu", [T(3, 4, 6)], {}, ALL),
    "glu-dim": ("glu", [T(3, 4, 6), 1], {}, ALL),
    "softmax": ("softmax", [T(3, 4, 5), 1], {}, ALL),
    "softmax-dtype": ("softmax", [T(3, 4, 5), -1, 3, Dtype(kiln.float64)], {}, WIDE),
    "log_softmax": ("log_softmax", [T(3, 4, 5), 2], {}, ALL),
    "softmin": ("softmin", [T(3, 4, 5), 0], {}, ALL),
    "dropout-eval": ("dropout", [T(3, 4), 0.5, False], {}, WIDE),
    "linear": ("linear", [T(2, 3, 5), T(4, 5), T(4)], {}, WIDE),
    "bilinear": ("bilinear", [T(3, 4), T(3, 5), T(6, 4, 5), T(6)], {}, WIDE),
    "conv2d": ("conv2d", [T(2, 4, 7, 7), T(6, 2, 3, 3), T(6), 2, 1, 1, 2], {}, WIDE),
    "conv2d-same": ("conv2d", [T(2, 3, 6, 7), T(4, 3, 2, 3), T(4), 1, "same", (2, 1)], {}, WIDE),
    "conv2d-valid": ("conv2d", [T(2, 3, 6, 7), T(6, 1, 3, 3), None, 1, "valid", 1, 3], {},
                     WIDE),
    "max_pool2d": ("max_pool2d", [T(2, 3, 7, 7), 3, 2, 1, 1, True], {}, WIDE),
    "avg_pool2d": ("avg_pool2d", [T(2, 3, 7, 7), 3, 2, 1, True, False], {}, WIDE),
    "adaptive_avg_pool2d": ("adaptive_avg_pool2d", [T(2, 3, 7, 5), (3, 2)], {}, WIDE),
    "adaptive_max_pool2d": ("adaptive_max_pool2d", [T(2, 3, 7, 5), 3], {}, WIDE),
    "pad-reflect": ("pad", [T(2, 3, 4), (1, 2, 0, 1), "reflect"], {}, WIDE),
    "pad-constant": ("pad", [T(2, 3, 4), (1, 2), "constant", 1.5], {}, WIDE),
    "embedding": ("embedding", [T(3, 4, kind="index", high=10), T(10, 5), 2], {}, WIDE),
    "pixel_shuffle": ("pixel_shuffle", [T(2, 8, 3, 3), 2], {}, WIDE),
    "pixel_unshuffle": ("pixel_unshuffle", [T(2, 2, 4, 6), 2], {}, WIDE),
    "sdpa": ("scaled_dot_product_attention", [T(2, 3, 4, 8), T(2, 3, 5, 8), T(2, 3, 5, 6)], {},
             WIDE),
    "sdpa-bool-mask": ("scaled_dot_product_attention",
                       [T(2, 3, 4, 8), T(2, 3, 5, 8), T(2, 3, 5, 6), T(2, 1, 4, 5, kind="bool")],
                       {}, WIDE),
    "sdpa-float-mask": ("scaled_dot_product_attention",
                        [T(2, 3, 4, 8), T(2, 3, 5, 8), T(2, 3, 5, 6), T(4, 5)], {}, WIDE),
    "sdpa-causal": ("scaled_dot_product_attention",
                    [T(2, 3, 4, 8), T(2, 3, 5, 8), T(2, 3, 5, 6), None, 0.0, True],
                    {"scale": 0.3}, WIDE),
    "sdpa-gqa": ("scaled_dot_product_attention", [T(2, 6, 4, 8), T(2, 2, 5, 8), T(2, 2, 5, 8)],
                 {"enable_gqa": True}, WIDE),
    "layer_norm": ("layer_norm", [T(2, 3, 4), (3, 4), T(3, 4), T(3, 4), 1e-3], {}, WIDE),
    "rms_norm": ("rms_norm", [T(2, 3, 4, low=-1e-3, high=1e-3), (4,), T(4)], {}, ALL),
    "group_norm": ("group_norm", [T(2, 6, 3, 3), 3, T(6), T(6), 1e-4], {}, ALL),
    "normalize": ("normalize", [T(3, 4, 5)], {}, WIDE),
    "normalize-p1": ("normalize", [T(3, 4, 5), 1.0, 2, 0.1], {}, WIDE),
    "cosine_similarity": ("cosine_similarity", [T(3, 4), T(1, 4)], {}, WIDE),
    "cosine_similarity-dim0": ("cosine_similarity", [T(4, 3), T(4, 3), 0, 1e-6], {}, WIDE),
    "pairwise_distance": ("pairwise_distance", [T(3, 4), T(3, 4)], {}, WIDE),
    "pairwise_distance-p1": ("pairwise_distance", [T(3, 4), T(4), 1.0, 1e-6, True], {}, WIDE),
    "mse_loss": ("mse_loss", [T(3, 4), T(3, 4)], {}, WIDE),
    "mse_loss-weight": ("mse_loss", [T(3, 4), T(3, 4), None, None, "mean",
                                     T(3, 4, low=0.1, grad=False)], {}, WIDE),
    "l1_loss-sum": ("l1_loss", [T(3, 4), T(3, 4), None, None, "sum"], {}, WIDE),
    "l1_loss-weight": ("l1_loss", [T(3, 4), T(3, 4)], {"weight": T(3, 4, low=0.1, grad=False)},
                       WIDE),
    "smooth_l1_loss": ("smooth_l1_loss", [T(3, 4), T(3, 4), None, None, "none", 0.5], {}, WIDE),
    "huber_loss": ("huber_loss", [T(3, 4), T(3, 4), "sum", 0.5], {}, WIDE),
    "huber_loss-weight": ("huber_loss", [T(3, 4), T(3, 4), "mean", 0.5,
                                         T(3, 4, low=0.1, grad=False)], {}, WIDE),
    "cross_entropy": ("cross_entropy", [T(5, 4), T(5, kind="index", high=4),
                                        T(4, low=0.5, grad=False), None, 1, None, "mean", 0.1],
                      {}, WIDE),
    "cross_entropy-2d": ("cross_entropy", [T(2, 4, 3, 3), T(2, 3, 3, kind="index", high=4)], {},
                         WIDE),
    "nll_loss": ("nll_loss", [T(5, 4), T(5, kind="index", high=4), T(4, low=0.5, grad=False),
                              None, 2], {}, WIDE),
    "binary_cross_entropy": ("binary_cross_entropy",
                             [T(6, kind="prob"), T(6, kind="prob", grad=False),
                              T(6, low=0.5, grad=False)], {}, WIDE),
    "binary_cross_entropy_with_logits": (
        "binary_cross_entropy_with_logits",
        [T(6), T(6, kind="prob", grad=False), T(6, low=0.5, grad=False), None, None, "sum",
         T(6, low=0.5, grad=False)], {}, WIDE),
    "kl_div-batchmean": ("kl_div", [T(4, 5, kind="logprob"), T(4, 5, kind="prob"), None, None,
                                    "batchmean"], {}, WIDE),
    "kl_div-mean": ("kl_div", [T(4, 5, kind="logprob"), T(4, 5, kind="prob")], {}, WIDE),
    "kl_div-log-target": ("kl_div", [T(4, 5, kind="logprob"), T(4, 5, kind="logprob")],
                          {"reduction": "sum", "log_target": True}, WIDE),
}


def materialize(torch, value, dtype, rng, tensors):
    """(kiln argument, torch argument) for one argument; tensors that take gradients are added
    to ``tensors`` as (kiln, torch) pairs."""
    if isinstance(value, Dtype):
        return value.dtype, getattr(torch, value.dtype.name)
    if not isinstance(value, T):
        return value, value
    values = value.values(dtype, rng)
    ours, theirs = value.kiln(values, dtype), value.torch(torch, values, dtype)
    if value.grad:
        tensors.append((ours.requires_grad_(), theirs))
    return ours, theirs


def case_params():
    return [pytest.param(case, dtype, id=f"{case}-{dtype.name}")
            for case, (_, _, _, dtypes) in CASES.items() for dtype in dtypes]


@pytest.mark.parametrize("case, dtype", case_params())
def test_values_and_gradients_match_torch(torch, case, dtype, rng):
    name, args, kwargs, _ = CASES[case]
    tensors = []
    pairs = [materialize(torch, a, dtype, rng, tensors) for a in args]
    keyword_pairs = {k: materialize(torch, v, dtype, rng, tensors) for k, v in kwargs.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # kl_div's about 'mean', in both
        out = getattr(F, name)(*[p[0] for p in pairs], **{k: p[0] for k, p in
                                                            keyword_pairs.items()})
        expected = getattr(torch.nn.functional, name)(*[p[1] for p in pairs],
                                                      **{k: p[1] for k, p in
                                                         keyword_pairs.items()})
    assert out.shape == tuple(expected.shape)
    assert out.dtype.name == str(expected.dtype).replace("torch.", "")
    check_torch(out, expected, out.dtype, "value", scale_atol=True)
    if not tensors:
        return
    upstream = random_array(out.shape, out.dtype, rng, 0.5, 2.0)
    grads = kiln.autograd.grad(out, [k for k, _ in tensors], t(upstream, out.dtype))
    wants = torch.autograd.grad(expected, [p for _, p in tensors],
                                torch_twin(torch, upstream, out.dtype, False))
    for i, (grad, want) in enumerate(zip(grads, wants)):
        check_torch(grad, want, dtype, f"gradient of tensor {i}", scale_atol=True)


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.bfloat16],
                         ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(4, 3), (4, 3, 5), (2, 3, 2, 4)])
def test_batch_norm_matches_torch_with_its_running_stats(torch, shape, dtype, rng):
    # Against PyTorch in float64 on the same values: its bfloat16 backward rounds its sums, which
    # can cancel in the gradients of weight and bias (Kiln's sums are in float32).
    tensors = []
    x, tx = materialize(torch, T(*shape), dtype, rng, tensors)
    w, tw = materialize(torch, T(3, low=0.5), dtype, rng, tensors)
    b, tb = materialize(torch, T(3), dtype, rng, tensors)
    tx, tw, tb = (v.detach().double().requires_grad_() for v in (tx, tw, tb))
    tensors = [(k, p) for (k, _), p in zip(tensors, (tx, tw, tb))]
    mean, var = np.zeros(3), rng.uniform(0.5, 2.0, size=3)
    stats = [t(mean, kiln.float64).to(dtype), t(var, kiln.float64).to(dtype)]
    torch_stats = [torch_twin(torch, mean, kiln.float64, False),
                   torch_twin(torch, var, kiln.float64, False)]
    for training in (True, False):
        out = F.batch_norm(x, *stats, w, b, training, 0.3, 1e-3)
        expected = torch.nn.functional.batch_norm(tx, *torch_stats, tw, tb, training, 0.3, 1e-3)
        check_torch(out, expected, dtype, f"value (training={training})", scale_atol=True)
        for ours, theirs in zip(stats, torch_stats):
            check_torch(ours, theirs, dtype, "running statistics")
        upstream = random_array(out.shape, dtype, rng, 0.5, 2.0)
        grads = kiln.autograd.grad(out, [k for k, _ in tensors], t(upstream, dtype))
        wants = torch.autograd.grad(expected, [p for _, p in tensors],
                                    torch_twin(torch, upstream, kiln.float64, False))
        for name, grad, want in zip(("input", "weight", "bias"), grads, wants):
            check_torch(grad, want, dtype, f"gradient of {name}", scale_atol=True)


@pytest.mark.parametrize("fn, args", INPLACE[:-1], ids=lambda v: getattr(v, "__name__", ""))
def test_inplace_matches_torch(torch, fn, args, rng):
    values = rng.uniform(-4, 4, size=(3, 5))
    x, tx = t(values, kiln.float32), torch.tensor(values, dtype=torch.float32)
    assert fn(x, *args, True).is_same(x)
    getattr(torch.nn.functional, fn.__name__)(tx, *args, True)
    check_torch(x, tx, kiln.float32, "in place")


def test_one_hot_matches_torch(torch, rng):
    labels = rng.integers(0, 5, size=(3, 4))
    for num_classes in (-1, 7):
        out = F.one_hot(t(labels), num_classes)
        expected = torch.nn.functional.one_hot(torch.tensor(labels), num_classes)
        assert out.dtype == kiln.int64
        np.testing.assert_array_equal(out.numpy(), expected.numpy())


def test_dropout_keeps_torchs_scaling(torch):
    x = t(np.ones((100, 100)), kiln.float32)
    out = F.dropout(x, 0.3).numpy()
    expected = torch.nn.functional.dropout(torch.ones(100, 100), 0.3).numpy()
    assert set(np.unique(out)) == set(np.unique(expected))
    assert abs((out == 0).mean() - 0.3) < 0.03
