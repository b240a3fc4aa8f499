"""Fits the float32 polynomials of Note [float32 erfc] and Note [float32 exp] (vec_math-inl.h).

    pip install mpmath numpy && python scripts/fit_erfc.py

Prints float32 coefficients, highest degree first, and each fit's worst relative error on a dense
Chebyshev grid (before the kernel's own rounding). Each fit is a weighted minimax (Lawson
iteration on least squares), with the coefficients rounded to float32 one at a time from the top
and the lower ones refitted after each rounding, so the rounding costs almost nothing.
"""

import mpmath as mp
import numpy as np

mp.mp.dps = 40


def lawson(basis, target, iters=300):
    """Coefficients minimising max |basis @ c - target| (Lawson's reweighted least squares)."""
    w = np.full(len(target), 1.0 / len(target))
    best = None
    for _ in range(iters):
        sw = np.sqrt(w)
        c, *_ = np.linalg.lstsq(basis * sw[:, None], target * sw, rcond=None)
        err = np.abs(basis @ c - target)
        if best is None or err.max() < best[1]:
            best = (c, err.max())
        w = w * err
        w /= w.sum()
    return best[0]


def fit_relative(u, f, degree):
    """float32 coefficients of a polynomial in u approximating f with minimax relative error."""
    basis = np.vander(u, degree + 1, increasing=True) / f[:, None]
    rest = np.ones_like(f)
    coef = np.zeros(degree + 1)
    for j in range(degree, -1, -1):
        coef[j] = np.float32(lawson(basis[:, : j + 1], rest)[j])
        rest = rest - coef[j] * basis[:, j]
    return coef, float(np.max(np.abs(rest)))


def chebyshev_grid(lo, hi, n=2500):
    k = np.arange(n)
    return np.concatenate([(lo + hi) / 2 + (hi - lo) / 2 * np.cos(np.pi * (k + 0.5) / n), [lo, hi]])


def show(name, coef, err, note=""):
    print(f"{name}: worst relative error {err:.3g}{note}")
    print("  " + ", ".join(f"{np.float32(c):.9g}f" for c in coef[::-1]))


# 0.5 * erfc(a) = t * P(t) * exp(-a^2), t = 1 / (1 + a / 2), a in [0, 10.5].
A_MAX = 10.5
ts = chebyshev_grid(1 / (1 + A_MAX / 2), 1.0)
a = [(1 / mp.mpf(t) - 1) * 2 for t in ts]
half_p = np.array([float(mp.erfc(ai) * mp.exp(ai * ai) / mp.mpf(t) / 2) for ai, t in zip(a, ts)])
coef, err = fit_relative(ts, half_p, 8)
show("P(t) / 2", coef, err)

# exp(r) on |r| <= ln(2) / 2.
rs = chebyshev_grid(-np.log(2) / 2, np.log(2) / 2)
coef, err = fit_relative(rs, np.array([float(mp.exp(mp.mpf(r))) for r in rs]), 6)
show("exp(r)", coef, err)
