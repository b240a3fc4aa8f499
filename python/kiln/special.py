"""kiln.special: torch.special's functions that Kiln has, under torch.special's names, so that
code calling ``torch.special.gammaln(x)`` runs as ``kiln.special.gammaln(x)``.

Each name is the kiln.mint function itself (the same op, autograd rule and kiln.jit tracing):

    digamma, psi        kiln.mint.digamma: Gamma'(x) / Gamma(x)
    gammaln             kiln.mint.lgamma: log |Gamma(x)|
    polygamma(n, x)     kiln.mint.polygamma: the n-th derivative of digamma
    erf, erfc, erfinv   the error function, its complement and its inverse
    expit, logit        kiln.mint.sigmoid and kiln.mint.logit(input, eps=None)
    exp2, expm1, log1p  2^x, e^x - 1 and log(1 + x)
    round               kiln.mint.round(input, *, decimals=0)
    softmax, log_softmax, logsumexp
    xlogy, sinc         x * log(y) (0 where x == 0) and sin(pi x) / (pi x)

Integer and bool inputs give the default dtype (kiln.get_default_dtype()), as in PyTorch.
"""

from .mint import (digamma, erf, erfc, erfinv, exp2, expm1, lgamma, log1p,  # noqa: F401,A004
                   log_softmax, logit, logsumexp, polygamma, round, sigmoid, sinc, softmax,
                   xlogy)

psi = digamma
gammaln = lgamma
expit = sigmoid

__all__ = ["digamma", "erf", "erfc", "erfinv", "exp2", "expit", "expm1", "gammaln", "log1p",
           "log_softmax", "logit", "logsumexp", "polygamma", "psi", "round", "sinc", "softmax",
           "xlogy"]
