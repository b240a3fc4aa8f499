"""Training step time of the examples' models: Kiln eager, Kiln jitted (kiln_cpu, one graph for
forward + backward + Adam) and PyTorch eager, on the same model, initial weights and batches; and
for the digits MLP, the time each takes to reach 95% test accuracy.

    chrt -r 10 .venv/bin/python bench/train_bench.py                # both models, 5 rounds each
    .venv/bin/python bench/train_bench.py --model mlp --quick       # smoke run
    .venv/bin/python bench/train_bench.py --torch-python OTHER/python   # PyTorch from another env

--model mlp is examples/train_mlp.py's 64-128-64-10 ReLU MLP on scikit-learn's digits, batch 64,
Adam (lr 1e-3), cross-entropy; PyTorch gets the same initial weights and batches.

--model charlm is train_charlm.py's default: 2 pre-norm blocks, d_model 64, 4 heads, context 64, MLP
256, batch 16, its vocabulary from the default text (Kiln and PyTorch use the same one). A step is
forward, cross-entropy, backward and an Adam update, then reading the loss back (`.item()`, which
waits for Kiln's asynchronous work). Kiln eager runs the MLP activation as the custom op
(ops.bias_gelu, with its gradient rule); Kiln jit runs gelu(h + b), which the example's pattern
pass rewrites into that op; PyTorch runs F.gelu(h + b) and torch.optim.Adam (defaults:
foreach). PyTorch is a benchmark-only dependency; without it its row reads n/a.

Each variant runs in its own child process (one thread pool at a time; torch.set_num_threads
to the core count, as Kiln's default), alternated for --rounds rounds. A child runs --warmup
steps, then --steps timed steps; the table gives the best and median per-step time over the
rounds (each round's time is its mean step) and ratios of best times against PyTorch eager (above
1.0: Kiln is faster). Before timing, every child's first-step loss is compared with Kiln
eager's (they start from the same weights and batch): a mismatch beyond 1e-4 fails the run.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ("kiln_eager", "kiln_jit", "torch_eager")


def charlm_child(variant):
    """(step, batches) for the transformer of examples/train_charlm.py."""
    sys.path.insert(0, str(ROOT / "examples"))
    import train_charlm as ex  # noqa: E402  (the example is the model's one definition)

    text = ex.default_text().read_text(encoding="utf-8", errors="replace")
    vocab = ex.Vocab(text)
    cfg = ex.Config(len(vocab))
    data = vocab.encode(text)
    rng = np.random.default_rng(0)
    offsets = np.arange(cfg.context + 1)
    windows = [data[rng.integers(0, len(data) - cfg.context - 1, cfg.batch)[:, None] + offsets]
               for _ in range(16)]
    if variant == "torch_eager":
        step, to_input = torch_step(ex, cfg)
    else:
        import kiln

        ops = ex.load_fused_ops()
        if variant == "kiln_jit":
            ex.register_fusion_pass(ops)
            act = ex.composite_gelu
        else:
            act = lambda h, b: ops.bias_gelu(h, b)  # noqa: E731
        params = ex.init_params(cfg, 0)
        step = ex.make_train_step(params, cfg, act)
        if variant == "kiln_jit":
            step = kiln.jit(step, backend="kiln_cpu")

        def to_input(w):
            return kiln.tensor(w[:, :-1]), kiln.tensor(w[:, 1:])

    return step, [to_input(w) for w in windows]


def mlp_child(variant):
    """(step, batches, accuracy) for the MLP of examples/train_mlp.py; accuracy() is the test
    accuracy of the model as trained so far."""
    sys.path.insert(0, str(ROOT / "examples"))
    import train_mlp as ex  # noqa: E402

    x_train, y_train, x_test, y_test = ex.load_data(0)
    rng = np.random.default_rng(0)
    order = np.concatenate([rng.permutation(len(x_train)) for _ in range(4)])
    batch = 64
    index = [order[i:i + batch] for i in range(0, len(order) - batch + 1, batch)]
    import kiln
    from kiln import nn, optim

    kiln.manual_seed(0)
    net = ex.make_mlp()
    if variant == "torch_eager":
        import torch

        torch.set_num_threads(os.cpu_count() or 1)
        weights = [torch.tensor(p.detach().numpy()) for p in net.trainable_params()]
        model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                    torch.nn.Linear(128, 64), torch.nn.ReLU(),
                                    torch.nn.Linear(64, 10))
        with torch.no_grad():
            for p, w in zip(model.parameters(), weights):
                p.copy_(w)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)

        def step(x, y):
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss

        batches = [(torch.from_numpy(x_train[i]), torch.from_numpy(y_train[i])) for i in index]

        def accuracy():
            with torch.no_grad():
                return float((model(torch.from_numpy(x_test)).argmax(-1).numpy() == y_test).mean())

        return step, batches, accuracy
    loss_fn = nn.CrossEntropyLoss()
    opt = optim.Adam(net.trainable_params(), lr=1e-3)
    grad_fn = kiln.value_and_grad(lambda x, y: loss_fn(net(x), y), None, opt.parameters)

    def step(x, y):
        loss, grads = grad_fn(x, y)
        opt(grads)
        return loss

    if variant == "kiln_jit":
        step = kiln.jit(step, backend="kiln_cpu")
    batches = [(kiln.tensor(x_train[i]), kiln.tensor(y_train[i])) for i in index]
    return step, batches, lambda: ex.accuracy(net, x_test, y_test)


def child(variant, args):
    if args.model == "charlm":
        step, batches = charlm_child(variant)
    else:
        step, batches, accuracy = mlp_child(variant)
    first = step(*batches[0]).item()
    for i in range(args.warmup):
        step(*batches[(i + 1) % len(batches)]).item()
    start = time.perf_counter()
    for i in range(args.steps):
        loss = step(*batches[i % len(batches)])
    loss.item()
    per_step = (time.perf_counter() - start) / args.steps
    result = {"first_loss": first, "step_s": per_step}
    if args.model == "mlp":
        # Time to 95% test accuracy from the weights trained so far is not a fair start: a fresh
        # model (same seed) trains epoch by epoch until it gets there; evaluation is not timed.
        step, batches, accuracy = mlp_child(variant)
        trained, epochs = 0.0, 0
        per_epoch = len(batches) // 4
        while epochs < 50:
            start = time.perf_counter()
            for b in batches[(epochs % 4) * per_epoch:(epochs % 4 + 1) * per_epoch]:
                loss = step(*b)
            loss.item()
            trained += time.perf_counter() - start
            epochs += 1
            if accuracy() >= 0.95:
                break
        result.update(to95_s=trained, to95_epochs=epochs)
    print(json.dumps(result))


def torch_step(ex, cfg):
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(os.cpu_count() or 1)
    params = {k: torch.tensor(a, requires_grad=True) for k, a in ex.init_arrays(cfg, 0).items()}
    opt = torch.optim.Adam(params.values(), lr=3e-3, betas=(0.9, 0.99), eps=1e-8)
    mask = torch.triu(torch.ones(cfg.context, cfg.context, dtype=torch.bool), diagonal=1)
    c, nh = cfg.d_model, cfg.heads
    hd = c // nh

    def loss_fn(idx, targets):
        b, t = idx.shape
        x = F.embedding(idx, params["wte"]) + params["wpe"]
        for i in range(cfg.layers):
            p = f"h{i}."
            h = F.layer_norm(x, [c], params[p + "ln1.w"], params[p + "ln1.b"])
            q, k, v = ((h @ params[p + w]).reshape(b, t, nh, hd).transpose(1, 2)
                       for w in ("wq", "wk", "wv"))
            att = (q @ k.transpose(2, 3)) * (1.0 / hd ** 0.5)
            att = torch.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, t, c)
            x = x + (y @ params[p + "wo"] + params[p + "bo"])
            h = F.layer_norm(x, [c], params[p + "ln2.w"], params[p + "ln2.b"])
            x = x + (F.gelu(h @ params[p + "w1"] + params[p + "b1"]) @ params[p + "w2"]
                     + params[p + "b2"])
        x = F.layer_norm(x, [c], params["lnf.w"], params["lnf.b"])
        logits = x @ params["wte"].t()
        return F.cross_entropy(logits.reshape(b * t, -1), targets.reshape(b * t))

    def step(idx, targets):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(idx, targets)
        loss.backward()
        opt.step()
        return loss

    def to_input(w):
        return torch.from_numpy(w[:, :-1].copy()), torch.from_numpy(w[:, 1:].copy())

    return step, to_input


def run_child(variant, args):
    python = args.torch_python if variant == "torch_eager" and args.torch_python else sys.executable
    cmd = [python, str(Path(__file__).resolve()), "--child", variant, "--model", args.model,
           "--steps", str(args.steps), "--warmup", str(args.warmup)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(ROOT / "python"), os.environ.get("PYTHONPATH", "")) if p))
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"error": tail[0][:160]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 rounds of 10 steps")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--torch-python", help="the Python that has torch (default: this one)")
    parser.add_argument("--model", choices=("mlp", "charlm", "both"), default="both")
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.steps, args.warmup = 2, 10, 3
    if args.child:
        child(args.child, args)
        return
    failed = False
    for model in (("mlp", "charlm") if args.model == "both" else (args.model,)):
        args.model = model
        failed = bench(args) or failed
    if failed:
        sys.exit(1)


def bench(args):
    """Runs one model's variants, prints the table; True when something failed."""
    print(f"\n{args.model}: {os.cpu_count()} CPUs; {args.rounds} rounds of {args.steps} steps after "
          f"{args.warmup} warm-up steps, each variant in its own process", flush=True)
    times = {v: [] for v in VARIANTS}
    to95 = {v: [] for v in VARIANTS}
    first, errors = {}, {}
    for r in range(args.rounds):
        for v in VARIANTS:
            if v in errors:
                continue
            out = run_child(v, args)
            if "error" in out:
                errors[v] = out["error"]
                continue
            times[v].append(out["step_s"])
            first[v] = out["first_loss"]
            if "to95_s" in out:
                to95[v].append((out["to95_s"], out["to95_epochs"]))
        print(f"round {r + 1}: " + ", ".join(f"{v} {times[v][-1] * 1e3:.1f} ms"
                                              for v in VARIANTS if times[v]), flush=True)
    failed = False
    for v in VARIANTS:
        if v in first and "kiln_eager" in first and v != "kiln_eager":
            if abs(first[v] - first["kiln_eager"]) > 1e-4 * abs(first["kiln_eager"]):
                print(f"FAILED: {v}'s first-step loss {first[v]:.6f} != kiln_eager's "
                      f"{first['kiln_eager']:.6f}")
                failed = True
    torch_best = min(times["torch_eager"]) if times["torch_eager"] else None
    print(f"\n| variant | best ms/step | median ms/step | x vs PyTorch eager (best) |")
    print("|---|---|---|---|")
    for v in VARIANTS:
        if v in errors:
            print(f"| {v} | n/a ({errors[v]}) | | |")
            failed = failed or v != "torch_eager"
            continue
        best, med = min(times[v]), statistics.median(times[v])
        ratio = f"{torch_best / best:.2f}" if torch_best else "n/a"
        print(f"| {v} | {best * 1e3:.2f} | {med * 1e3:.2f} | {ratio} |")
    if any(to95.values()):
        print("\n| variant | time to 95% test accuracy (best, s) | epochs |")
        print("|---|---|---|")
        for v in VARIANTS:
            if to95[v]:
                seconds, epochs = min(to95[v])
                print(f"| {v} | {seconds:.3f} | {epochs} |")
    return failed


if __name__ == "__main__":
    main()
