"""scanlib.scipy.stats.nbinom: the negative binomial distribution's logpmf and pmf (failures
before the n-th success), as jax.scipy.stats.nbinom (the same formulas). Imports ops."""

from __future__ import annotations

import numpy as np

from ...ops import exp, where
from ...tape import Tensor
from ..special import gammaln, promote_inexact, xlogy

__all__ = ["logpmf", "pmf"]


def logpmf(k, n, p, loc=0) -> Tensor:
    """lgamma(y + n) - lgamma(n) - lgamma(y + 1) + n log(p) + y log(1 - p), y = k - loc, -inf
    below loc, as jax.scipy.stats.nbinom.logpmf.

    >>> sl.scipy.stats.nbinom.logpmf(sl.tensor([0.0, 2.0, -1.0]), 3.0, 0.4)
    """
    k, n, p, loc = promote_inexact("nbinom.logpmf", k, n, p, loc)
    y = k - loc
    comb_term = gammaln(y + n) - gammaln(n) - gammaln(y + 1)
    return where(k < loc, -np.inf, comb_term + (xlogy(n, p) + xlogy(y, 1 - p)))


def pmf(k, n, p, loc=0) -> Tensor:
    """P(K = k) = exp(logpmf(k, n, p, loc)), as jax.scipy.stats.nbinom.pmf.

    >>> sl.scipy.stats.nbinom.pmf(sl.tensor([0.0, 2.0]), 3.0, 0.4)
    """
    return exp(logpmf(k, n, p, loc))
