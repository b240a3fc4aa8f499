"""Forward cost of single ops outside the foundation's benchmark set, Kiln vs PyTorch: for each
case, the time of one call, best of 10 after a warm-up, on inputs of about 1M elements (float32
unless the name says otherwise).

    OMP_NUM_THREADS=1 chrt -r 10 .venv/bin/python bench/forward_bench.py [CASE ...]

Both frameworks run in this process on the same inputs; PyTorch with torch.set_num_threads from
OMP_NUM_THREADS (2 if unset), Kiln with its default (which follows OMP_NUM_THREADS). A case where
Kiln takes more than 1.5x PyTorch's time is marked "slow". Name cases to run only those.
"""

import os
import sys

import numpy as np
import torch

import kiln
from _timing import best_seconds  # this folder is on sys.path when run as a script

mint = kiln.mint
F = torch.nn.functional
RNG = np.random.default_rng(0)


def both(array):
    """The same values as a Kiln tensor and a PyTorch tensor."""
    return kiln.tensor(array), torch.from_numpy(np.ascontiguousarray(array).copy())


def cases():
    """name: (Kiln call, PyTorch call)."""
    x = RNG.standard_normal((1024, 1024)).astype(np.float32)
    xk, xt = both(x)
    hk, ht = both(x.astype(np.float16))
    bk, bt = xk.to(kiln.bfloat16), xt.to(torch.bfloat16)
    mk, mt = both(x > 0)
    nk, nt = both(RNG.random((1024, 1024)) > 0.5)
    yk, yt = both(RNG.standard_normal((1024, 1024)).astype(np.float32))
    labels = RNG.integers(0, 1024, size=1024)
    lk, lt = both(labels)
    sk, st = both(np.array(1.5, np.float32))
    ik, it = both(RNG.integers(-10**12, 10**12, size=(1024, 1024)))
    pk, pt = both(RNG.standard_normal((32, 64, 32, 16)).astype(np.float32))  # runs of 16
    ck, ct = both(RNG.standard_normal((64, 64, 64)).astype(np.float32))
    fk, ft = both(x.reshape(-1))
    wk, wt = both(RNG.random((1024, 1024)).astype(np.float32))
    masked = x.copy()
    masked[:, 1::2] = -np.inf  # half of every row masked out
    qk, qt = both(RNG.standard_normal((8, 8, 256, 32)).astype(np.float32))
    mask_k, mask_t = both(masked)
    rowk, rowt = both(RNG.standard_normal((1, 1024)).astype(np.float32))  # batch-1 inference
    dk, dt = both((RNG.random((1024, 1024)) * 20 + 1).astype(np.float32))  # divisors in [1, 21)
    jk, jt = both(RNG.integers(1, 10**6, size=(1024, 1024)))
    uk, ut = both(RNG.uniform(-1, 1, (1024, 1024)).astype(np.float32))  # erfinv's domain
    u64k, u64t = both(RNG.uniform(-1, 1, (1024, 1024)))
    return {
        "float16 add": (lambda: hk + hk, lambda: ht + ht),
        "float16 exp": (lambda: mint.exp(hk), lambda: torch.exp(ht)),
        "float16 x * 3": (lambda: hk * 3.0, lambda: ht * 3.0),
        "float16 sum dim1": (lambda: mint.sum(hk, 1), lambda: torch.sum(ht, 1)),
        "float16 sum dim0": (lambda: mint.sum(hk, 0), lambda: torch.sum(ht, 0)),
        "float16 softmax": (lambda: mint.softmax(hk, 1), lambda: torch.softmax(ht, 1)),
        "float16 neg": (lambda: -hk, lambda: -ht),
        "float16 relu": (lambda: mint.relu(hk), lambda: torch.relu(ht)),
        "bfloat16 add": (lambda: bk + bk, lambda: bt + bt),
        "bfloat16 x * 3": (lambda: bk * 3.0, lambda: bt * 3.0),
        "bfloat16 gelu": (lambda: mint.gelu(bk), lambda: F.gelu(bt)),
        "bfloat16 rms_norm": (lambda: mint.rms_norm(bk, [1024]), lambda: F.rms_norm(bt, [1024])),
        "bfloat16 layer_norm": (lambda: mint.layer_norm(bk, [1024]),
                                lambda: F.layer_norm(bt, [1024])),
        "cast to float16": (lambda: xk.to(kiln.float16), lambda: xt.to(torch.float16)),
        "cast to bfloat16": (lambda: xk.to(kiln.bfloat16), lambda: xt.to(torch.bfloat16)),
        "float16 to float32": (lambda: hk.to(kiln.float32), lambda: ht.to(torch.float32)),
        "logical_and": (lambda: mint.logical_and(mk, nk), lambda: torch.logical_and(mt, nt)),
        "prod dim1": (lambda: mint.prod(xk, 1), lambda: torch.prod(xt, 1)),
        "int64 amax dim1": (lambda: mint.amax(ik, 1), lambda: torch.amax(it, 1)),
        "mse_loss": (lambda: mint.mse_loss(xk, yk), lambda: F.mse_loss(xt, yt)),
        "pow 3": (lambda: mint.pow(xk, 3.0), lambda: torch.pow(xt, 3.0)),
        "logsumexp dim0": (lambda: mint.logsumexp(xk, 0), lambda: torch.logsumexp(xt, 0)),
        "cross_entropy": (lambda: mint.cross_entropy(xk, lk), lambda: F.cross_entropy(xt, lt)),
        "rand": (lambda: mint.rand([1024, 1024]), lambda: torch.rand(1024, 1024)),
        "randn": (lambda: mint.randn([1024, 1024]), lambda: torch.randn(1024, 1024)),
        "randint": (lambda: mint.randint(0, 10, [1024, 1024]),
                    lambda: torch.randint(0, 10, (1024, 1024))),
        "dropout": (lambda: mint.dropout(xk, 0.5, True), lambda: F.dropout(xt, 0.5, True)),
        "floor_divide": (lambda: mint.floor_divide(xk, yk), lambda: torch.floor_divide(xt, yt)),
        "remainder": (lambda: mint.remainder(xk, yk), lambda: torch.remainder(xt, yt)),
        "remainder 0.5": (lambda: mint.remainder(xk, 0.5), lambda: torch.remainder(xt, 0.5)),
        "tan": (lambda: mint.tan(xk), lambda: torch.tan(xt)),
        "erfinv": (lambda: kiln.special.erfinv(uk), lambda: torch.special.erfinv(ut)),
        "float64 erfinv": (lambda: kiln.special.erfinv(u64k), lambda: torch.special.erfinv(u64t)),
        "float16 erfinv": (lambda: kiln.special.erfinv(uk.to(kiln.float16)),
                           lambda: torch.special.erfinv(ut.to(torch.float16))),
        "permute 0213 copy": (lambda: pk.permute(0, 2, 1, 3).contiguous(),
                              lambda: pt.permute(0, 2, 1, 3).contiguous()),
        "expand 0-d copy": (lambda: mint.expand(sk, [1024, 1024]).contiguous(),
                            lambda: st.expand(1024, 1024).contiguous()),
        "pad reflect": (lambda: mint.pad(ck, [1, 1, 1, 1], "reflect"),
                        lambda: F.pad(ct, [1, 1, 1, 1], mode="reflect")),
        "pad 4-d by 2": (lambda: mint.pad(pk, [2, 2, 2, 2]), lambda: F.pad(pt, [2, 2, 2, 2])),
        "sort 1M": (lambda: mint.sort(fk), lambda: torch.sort(ft)),
        "sort dim1": (lambda: mint.sort(xk, 1), lambda: torch.sort(xt, 1)),
        "sort dim0": (lambda: mint.sort(xk, 0), lambda: torch.sort(xt, 0)),
        "topk 10 dim1": (lambda: mint.topk(xk, 10), lambda: torch.topk(xt, 10)),
        "topk 10 of 1M": (lambda: mint.topk(fk, 10), lambda: torch.topk(ft, 10)),
        "topk 512 dim1": (lambda: mint.topk(xk, 512), lambda: torch.topk(xt, 512)),
        "randperm 1M": (lambda: mint.randperm(1 << 20), lambda: torch.randperm(1 << 20)),
        "multinomial 1024x8": (lambda: mint.multinomial(wk, 8),
                               lambda: torch.multinomial(wt, 8)),
        "multinomial repl": (lambda: mint.multinomial(wk, 1024, True),
                             lambda: torch.multinomial(wt, 1024, True)),
        "softmax masked": (lambda: mint.softmax(mask_k, 1), lambda: torch.softmax(mask_t, 1)),
        "sdpa causal": (lambda: kiln.nn.functional.scaled_dot_product_attention(
                            qk, qk, qk, is_causal=True),
                        lambda: F.scaled_dot_product_attention(qt, qt, qt, is_causal=True)),
        "linear 1 row": (lambda: mint.linear(rowk, xk), lambda: F.linear(rowt, xt)),
        "matmul 1 row": (lambda: mint.matmul(rowk, xk), lambda: rowt @ xt),
        "dot 1M": (lambda: mint.dot(fk, fk), lambda: torch.dot(ft, ft)),
        "div trunc": (lambda: mint.div(xk, dk, rounding_mode="trunc"),
                      lambda: torch.div(xt, dt, rounding_mode="trunc")),
        "div trunc int64": (lambda: mint.div(ik, jk, rounding_mode="trunc"),
                            lambda: torch.div(it, jt, rounding_mode="trunc")),
        "exp (control)": (lambda: mint.exp(xk), lambda: torch.exp(xt)),
    }


def main():
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    print(f"kiln {kiln.__version__}, torch {torch.__version__}, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
    chosen = set(sys.argv[1:])
    for name, (kiln_fn, torch_fn) in cases().items():
        if chosen and name not in chosen:
            continue
        k = best_seconds(kiln_fn, 10, kiln.runtime.synchronize) * 1e3
        t = best_seconds(torch_fn, 10) * 1e3
        slow = "  slow" if k > 1.5 * t else ""
        print(f"{name:20s} kiln {k:8.3f} ms  torch {t:8.3f} ms  torch/kiln {t / k:6.2f}x{slow}")


if __name__ == "__main__":
    main()
