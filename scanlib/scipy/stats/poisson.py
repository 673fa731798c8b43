"""scanlib.scipy.stats.poisson: the Poisson distribution's logpmf and pmf, as
jax.scipy.stats.poisson (the same formulas). Imports ops."""

from __future__ import annotations

import numpy as np

from ...ops import exp, round, where
from ...tape import Tensor
from ..special import gammaln, promote_inexact, xlogy

__all__ = ["logpmf", "pmf"]


def logpmf(k, mu, loc=0) -> Tensor:
    """y log(mu) - lgamma(y + 1) - mu, y = k - loc, as jax.scipy.stats.poisson.logpmf: -inf
    where y < 0 or k is not an integer.

    >>> sl.scipy.stats.poisson.logpmf(sl.tensor([0.0, 1.0, 2.5, -1.0]), 2.0)
    """
    k, mu, loc = promote_inexact("poisson.logpmf", k, mu, loc)
    y = k - loc
    log_probs = xlogy(y, mu) - gammaln(y + 1) - mu
    return where((y < 0) | (round(k) != k), -np.inf, log_probs)


def pmf(k, mu, loc=0) -> Tensor:
    """P(K = k) = exp(logpmf(k, mu, loc)), as jax.scipy.stats.poisson.pmf.

    >>> sl.scipy.stats.poisson.pmf(sl.tensor([0.0, 1.0, 2.0]), 2.0)
    """
    return exp(logpmf(k, mu, loc))
