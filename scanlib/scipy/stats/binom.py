"""scanlib.scipy.stats.binom: the binomial distribution's logpmf and pmf, as
jax.scipy.stats.binom (the same formulas). Imports ops."""

from __future__ import annotations

import numpy as np

from ...ops import exp, where
from ...tape import Tensor
from ..special import gammaln, promote_inexact, xlog1py, xlogy

__all__ = ["logpmf", "pmf"]


def logpmf(k, n, p, loc=0) -> Tensor:
    """log C(n, y) + y log(p) + (n - y) log1p(-p), y = k - loc, as
    jax.scipy.stats.binom.logpmf: -inf outside loc <= k < loc + n + 1, and 0 where y = n = 0
    or where the p terms are 0 (p = 0 or 1 at the matching end).

    >>> sl.scipy.stats.binom.logpmf(sl.tensor([0.0, 2.0, 5.0, 6.0]), 5.0, 0.4)
    """
    k, n, p, loc = promote_inexact("binom.logpmf", k, n, p, loc)
    y = k - loc
    comb_term = gammaln(n + 1) - (gammaln(y + 1) + gammaln(n - y + 1))
    log_linear_term = xlogy(y, p) + xlog1py(n - y, -p)
    log_probs = where(((y == 0) & (n == 0)) | (log_linear_term == 0), 0.0,
                      comb_term + log_linear_term)
    return where((k >= loc) & (k < loc + n + 1), log_probs, -np.inf)


def pmf(k, n, p, loc=0) -> Tensor:
    """P(K = k) = exp(logpmf(k, n, p, loc)), as jax.scipy.stats.binom.pmf.

    >>> sl.scipy.stats.binom.pmf(sl.tensor([0.0, 2.0, 5.0]), 5.0, 0.4)
    """
    return exp(logpmf(k, n, p, loc))
