"""Train a small character-level transformer language model on a text file, then sample from it.

    python examples/train_charlm.py [--text FILE] [--seconds 120] [--steps N] [--eager] [--seed 0]

The text defaults to the longest licence under the OS's common-licenses folder (the GPL-3 on
Debian). The model -- embedding, 2 pre-norm transformer blocks (causal self-attention, an MLP),
a final layer norm and an output projection tied to the embedding -- is written with plain
kiln.mint ops over a dict of parameters. It shows the three things Kiln lets users add:

- a custom op: BiasGelu(x, b) = gelu(x + b), a full OpDef with a gradient rule written in C++
  (charlm/fused_ops.cpp), built and loaded by kiln.ops.CustomOpBuilder;
- a custom pass: kiln.graph.register_pattern rewrites gelu(x + b) into that op in every kiln_cpu
  graph; the script prints how often it fired in the training step and checks the rewrite's
  meaning with kiln.graph.verify_pass;
- the kiln_cpu backend: the whole training step (forward, cross-entropy, backward through
  kiln.value_and_grad(..., weights=params) and an Adam update written in place under
  kiln.no_grad()) is one @kiln.jit(backend="kiln_cpu") function.

The MLP's activation comes in two spellings of the same function: "composite" (mint.gelu(h + b),
which the pass turns into BiasGelu inside jitted graphs) and "fused" (ops.bias_gelu(h, b) called
directly, so eager training runs the custom op and its gradient rule too). By default the jitted
step uses the composite spelling and --eager the fused one.
"""

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import kiln
from kiln import mint

HERE = Path(__file__).resolve().parent
PASS_NAME = "BiasGeluFusion"
LICENSES = Path("/usr/share/common-licenses")


def default_text():
    """The longest plain-text file in the OS's licence folder."""
    files = [p for p in LICENSES.iterdir() if p.is_file()] if LICENSES.is_dir() else []
    if not files:
        sys.exit(f"no text found under {LICENSES}; pass --text FILE")
    return max(files, key=lambda p: (p.stat().st_size, p.name))


class Vocab:
    """Characters <-> integer ids, from the characters of the training text."""

    def __init__(self, text):
        self.chars = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.chars)}

    def __len__(self):
        return len(self.chars)

    def encode(self, text):
        return np.array([self.index[c] for c in text], dtype=np.int64)

    def decode(self, ids):
        return "".join(self.chars[int(i)] for i in ids)


class Config:
    def __init__(self, vocab, context=64, d_model=64, heads=4, layers=2, mlp=4, batch=16):
        assert d_model % heads == 0, "d_model must be a multiple of heads"
        self.vocab, self.context, self.d_model = vocab, context, d_model
        self.heads, self.layers, self.hidden, self.batch = heads, layers, mlp * d_model, batch


def load_fused_ops():
    """Builds (or loads from the cache) charlm/fused_ops.cpp: ops.bias_gelu."""
    return kiln.ops.CustomOpBuilder("charlm_fused_ops", [str(HERE / "charlm" / "fused_ops.cpp")],
                                    cflags=["-O3", "-fno-trapping-math"]).load()


def register_fusion_pass(ops):
    """gelu(x + b) -> BiasGelu(x, b) in every later kiln_cpu build, for a bias b [N] added to
    x [..., N] of the same floating dtype (what the custom op takes)."""
    if PASS_NAME in [p.name for p in kiln.graph.list_passes()]:
        kiln.graph.unregister_custom_pass(PASS_NAME)  # a second load in one process

    def fits(x, b):
        return (x.dtype in (kiln.float32, kiln.float64) and b.dtype == x.dtype and len(b.shape) == 1
                and len(x.shape) >= 1 and x.shape[-1] == b.shape[0])

    kiln.graph.register_pattern(PASS_NAME, src=lambda x, b: mint.gelu(x + b),
                                dst=lambda x, b: ops.bias_gelu(x, b), backend="kiln_cpu",
                                stage="pre_fusion", check=fits,
                                example_args=[mint.zeros((4, 8)), mint.zeros((8,))])


def init_arrays(cfg, seed):
    """The initial parameters as a dict of float32 NumPy arrays (GPT-2's initialisation)."""
    rng = np.random.default_rng(seed)
    c, h = cfg.d_model, cfg.hidden
    proj_std = 0.02 / math.sqrt(2 * cfg.layers)  # residual projections, as GPT-2

    def normal(shape, std=0.02):
        return rng.standard_normal(shape).astype(np.float32) * np.float32(std)

    arrays = {"wte": normal((cfg.vocab, c)), "wpe": normal((cfg.context, c))}
    for i in range(cfg.layers):
        p = f"h{i}."
        arrays.update({
            p + "ln1.w": np.ones(c, np.float32), p + "ln1.b": np.zeros(c, np.float32),
            p + "wq": normal((c, c)), p + "wk": normal((c, c)), p + "wv": normal((c, c)),
            p + "wo": normal((c, c), proj_std), p + "bo": np.zeros(c, np.float32),
            p + "ln2.w": np.ones(c, np.float32), p + "ln2.b": np.zeros(c, np.float32),
            p + "w1": normal((c, h)), p + "b1": np.zeros(h, np.float32),
            p + "w2": normal((h, c), proj_std), p + "b2": np.zeros(c, np.float32),
        })
    arrays.update({"lnf.w": np.ones(c, np.float32), "lnf.b": np.zeros(c, np.float32)})
    return arrays


def init_params(cfg, seed):
    """init_arrays as kiln leaf tensors that require grad."""
    return {name: kiln.tensor(a).requires_grad_() for name, a in init_arrays(cfg, seed).items()}


def causal_mask(t):
    """[t, t] bool, true above the diagonal: the positions a query must not see."""
    return kiln.tensor(np.triu(np.ones((t, t), dtype=bool), k=1))


def forward(params, idx, cfg, act, mask):
    """Logits [B, T, vocab] for token ids idx [B, T] (T <= context). `act(h, b)` is gelu(h + b)."""
    b, t = idx.shape
    c, nh = cfg.d_model, cfg.heads
    hd = c // nh
    wpe = params["wpe"] if t == cfg.context else params["wpe"][:t]
    x = mint.embedding(idx, params["wte"]) + wpe
    for i in range(cfg.layers):
        p = f"h{i}."
        h = mint.layer_norm(x, [c], params[p + "ln1.w"], params[p + "ln1.b"])

        def heads(w):  # [B, T, C] -> [B, heads, T, hd]
            return mint.transpose(mint.reshape(h @ w, (b, t, nh, hd)), 1, 2)

        q, k, v = heads(params[p + "wq"]), heads(params[p + "wk"]), heads(params[p + "wv"])
        att = (q @ mint.transpose(k, 2, 3)) * (1.0 / math.sqrt(hd))
        att = mint.softmax(mint.masked_fill(att, mask, float("-inf")), dim=-1)
        y = mint.reshape(mint.transpose(att @ v, 1, 2), (b, t, c))
        x = x + (y @ params[p + "wo"] + params[p + "bo"])
        h = mint.layer_norm(x, [c], params[p + "ln2.w"], params[p + "ln2.b"])
        x = x + (act(h @ params[p + "w1"], params[p + "b1"]) @ params[p + "w2"] + params[p + "b2"])
    x = mint.layer_norm(x, [c], params["lnf.w"], params["lnf.b"])
    return x @ mint.transpose(params["wte"], 0, 1)  # tied output projection


def composite_gelu(h, b):
    return mint.gelu(h + b)


def make_loss(params, cfg, act):
    mask = causal_mask(cfg.context)

    def loss_fn(idx, targets):
        logits = forward(params, idx, cfg, act, mask)
        n = idx.shape[0] * idx.shape[1]
        return mint.cross_entropy(mint.reshape(logits, (n, cfg.vocab)), mint.reshape(targets, (n,)))

    return loss_fn


def make_train_step(params, cfg, act, lr=3e-3, betas=(0.9, 0.99), eps=1e-8):
    """step(idx, targets) -> loss: forward, backward and an in-place Adam update of `params`.
    The Adam state (moments and step count) lives in tensors the step updates in place, so the
    same function runs eagerly and as one jitted graph."""
    weights = list(params.values())
    grad_fn = kiln.value_and_grad(make_loss(params, cfg, act), grad_position=None, weights=weights)
    m = [mint.zeros_like(w.detach()) for w in weights]
    v = [mint.zeros_like(w.detach()) for w in weights]
    count = mint.zeros(())
    b1, b2 = betas

    def step(idx, targets):
        loss, grads = grad_fn(idx, targets)
        with kiln.no_grad():
            mint.add(count, 1.0, out=count)
            # lr_t = lr sqrt(1 - b2^t) / (1 - b1^t), computed from the count tensor so that a
            # traced step stays valid at every t.
            bc1 = 1.0 - mint.exp(count * math.log(b1))
            bc2 = 1.0 - mint.exp(count * math.log(b2))
            lr_t = mint.sqrt(bc2) * lr / bc1
            for w, g, m_, v_ in zip(weights, grads, m, v):
                mint.add(m_ * b1, g * (1.0 - b1), out=m_)
                mint.add(v_ * b2, mint.square(g) * (1.0 - b2), out=v_)
                mint.sub(w, lr_t * m_ / (mint.sqrt(v_) + eps), out=w)
        return loss

    return step


def batches(data, cfg, seed):
    """Endless random (inputs, targets) windows of the encoded text, as kiln int64 tensors."""
    rng = np.random.default_rng(seed)
    offsets = np.arange(cfg.context + 1)
    while True:
        starts = rng.integers(0, len(data) - cfg.context - 1, size=cfg.batch)
        window = data[starts[:, None] + offsets]
        yield kiln.tensor(window[:, :-1]), kiln.tensor(window[:, 1:])


def sample(params, cfg, vocab, act, prompt, length, temperature, seed):
    """`length` characters after `prompt`, drawn one at a time from softmax(logits / T)."""
    rng = np.random.default_rng(seed)
    ids = list(vocab.encode(prompt))
    masks = {}
    with kiln.no_grad():
        for _ in range(length):
            window = ids[-cfg.context:]
            t = len(window)
            if t not in masks:
                masks[t] = causal_mask(t)
            logits = forward(params, kiln.tensor(np.array([window])), cfg, act, masks[t])
            last = logits[0, t - 1].numpy().astype(np.float64) / temperature
            p = np.exp(last - last.max())
            ids.append(int(rng.choice(len(p), p=p / p.sum())))
    return vocab.decode(ids[len(prompt):])


def pass_matches(f):
    """How many times the fusion pass rewrote gelu(x + b) in f's last build."""
    return sum(r.matches for r in f.pass_report() if r.pass_name == PASS_NAME)


def train(args, log=print):
    """Trains per `args`; returns a dict of what happened (losses, steps/s, pass matches, ...)."""
    text_path = Path(args.text) if args.text else default_text()
    text = text_path.read_text(encoding="utf-8", errors="replace")
    vocab = Vocab(text)
    data = vocab.encode(text)
    cfg = Config(len(vocab), args.context, args.d_model, args.heads, args.layers, 4, args.batch)
    log(f"text: {text_path} ({len(text)} characters, {len(vocab)} distinct)")
    log(f"model: {cfg.layers} blocks, d_model {cfg.d_model}, {cfg.heads} heads, context "
        f"{cfg.context}, MLP {cfg.hidden}; batch {cfg.batch}; "
        f"{'eager' if args.eager else 'one kiln.jit(backend=kiln_cpu) step'}")

    start = time.perf_counter()
    ops = load_fused_ops()
    log(f"fused_ops.cpp: BiasGelu loaded in {time.perf_counter() - start:.2f} s")
    act_name = args.act or ("fused" if args.eager else "composite")
    act = (lambda h, b: ops.bias_gelu(h, b)) if act_name == "fused" else composite_gelu
    result = {"vocab": len(vocab), "act": act_name}
    if not args.eager:
        register_fusion_pass(ops)
        report = kiln.graph.verify_pass(PASS_NAME, trials=args.verify_trials, seed=args.seed)
        log(f"verify_pass({PASS_NAME}): {report.rewrites} of {report.trials} random instances "
            f"rewritten, {report.failures} disagreed -> {'ok' if report.ok else 'FAILED'}")
        result["verified"] = report.ok
        if not report.ok:
            log(str(report))

    params = init_params(cfg, args.seed)
    n_params = sum(int(np.prod(p.shape)) for p in params.values())
    log(f"{n_params} parameters; MLP activation: {act_name}")
    step = make_train_step(params, cfg, act, lr=args.lr)
    if not args.eager:
        step = kiln.jit(step, backend="kiln_cpu")
    source = batches(data, cfg, args.seed)

    losses, times = [], []
    deadline = time.perf_counter() + args.seconds if args.seconds else None
    n = 0
    while (args.steps is None or n < args.steps) and (deadline is None
                                                       or time.perf_counter() < deadline):
        idx, targets = next(source)
        t0 = time.perf_counter()
        loss = step(idx, targets).item()
        times.append(time.perf_counter() - t0)
        losses.append(loss)
        if n == 0 and not args.eager:
            result["pass_matches"] = pass_matches(step)
            log(f"first step (trace + passes + build + run): {times[0]:.2f} s; "
                f"{PASS_NAME} rewrote gelu(x + b) {result['pass_matches']} times")
        if n % args.log_every == 0:
            recent = losses[-args.log_every:]
            log(f"step {n:5d}  loss {loss:.3f}  (mean of last {len(recent)}: "
                f"{statistics.fmean(recent):.3f})")
        n += 1
    if not losses:
        sys.exit("no step ran: raise --seconds or --steps")
    steady = times[1:] or times
    window = max(1, min(50, len(losses) // 10))
    result.update(losses=losses, steps=n, step_ms_median=1e3 * statistics.median(steady),
                  steps_per_s=len(steady) / sum(steady), first=statistics.fmean(losses[:window]),
                  last=statistics.fmean(losses[-window:]))
    log(f"{n} steps in {sum(times):.1f} s: {result['steps_per_s']:.1f} steps/s (median step "
        f"{result['step_ms_median']:.1f} ms after the first)")
    log(f"loss: first {window} steps {result['first']:.3f} -> last {window} steps "
        f"{result['last']:.3f} (min {min(losses):.3f})")
    if args.sample:
        prompt = text[:32]
        start = time.perf_counter()
        out = sample(params, cfg, vocab, act, prompt, args.sample, args.temperature, args.seed)
        log(f"sample ({args.sample} characters at temperature {args.temperature}, "
            f"{time.perf_counter() - start:.1f} s) after the prompt {prompt!r}:")
        log("-" * 72)
        log(prompt + out)
        log("-" * 72)
        result["sample"] = out
    result["params"], result["cfg"] = params, cfg
    return result


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--text", help="training text (default: the longest OS licence text)")
    p.add_argument("--seconds", type=float, default=120.0, help="training time budget (0: none)")
    p.add_argument("--steps", type=int, default=None, help="stop after this many steps")
    p.add_argument("--eager", action="store_true", help="run the training step eagerly (no jit)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--act", choices=["fused", "composite"],
                   help="MLP activation spelling (default: fused eagerly, composite with jit)")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--log-every", type=int, default=100)
    p.add_argument("--sample", type=int, default=400, help="characters to sample (0: none)")
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--verify-trials", type=int, default=50)
    return p.parse_args(argv)


def say(*parts):
    print(*parts, flush=True)


if __name__ == "__main__":
    train(parse_args(), log=say)
