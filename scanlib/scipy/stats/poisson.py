"""scanlib.scipy.stats.poisson: the Poisson distribution's logpmf, pmf and cdf,
as jax.scipy.stats.poisson, and its entropy (the same formulas). Imports ops."""

from __future__ import annotations

import numpy as np

from ...ops import (arange, broadcast_shapes, broadcast_to, ceil, exp, floor, log, reshape, round,
                    sqrt, sum, where)
from ...tape import Tensor
from ..special import gammaincc, gammaln, promote_inexact, xlogy

__all__ = ["logpmf", "pmf", "cdf", "entropy"]


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


def cdf(k, mu, loc=0) -> Tensor:
    """P(K <= k) = gammaincc(floor(y) + 1, mu), y = k - loc; 0 where y < 0, as
    jax.scipy.stats.poisson.cdf. Differentiable in mu (to every order); a gradient through
    floor(k) is 0.

    >>> sl.scipy.stats.poisson.cdf(sl.tensor([-1.0, 0.0, 2.5, 10.0]), 2.0)
    """
    k, mu, loc = promote_inexact("poisson.cdf", k, mu, loc)
    y = k - loc
    below = y < 0
    return where(below, 0.0, gammaincc(floor(where(below, 0.0, y) + 1), mu))


def _entropy_by_sum(mu, max_k, upper):
    """-sum p log p over k = 0 .. max_k - 1, the terms from k = upper on left out."""
    k = reshape(arange(max_k, dtype=mu.dtype), (max_k,) + (1,) * mu.ndim)
    probs = where(k < upper, pmf(k, mu, 0), 0.0)
    return sum(where(probs < 0, -np.inf, -xlogy(probs, probs)), axis=0)


def entropy(mu, loc=0) -> Tensor:
    """The entropy -sum_k p(k) log p(k) of the Poisson distribution of mean mu, as
    jax.scipy.stats.poisson.entropy: a sum over k < mu + 20 for mu < 10, over k < mu +
    10 sqrt(mu) + 20 for mu < 100, and log(2 pi e mu) / 2 - 1 / (12 mu) above; 0 at mu = 0.
    loc shifts the distribution, which leaves the entropy as it is (it only broadcasts).

    >>> sl.scipy.stats.poisson.entropy(sl.tensor([0.5, 5.0, 500.0]))
    """
    mu, loc = promote_inexact("poisson.entropy", mu, loc)
    shape = broadcast_shapes(mu.shape, loc.shape)
    small = _entropy_by_sum(mu, 35, ceil(mu + 20))
    medium = _entropy_by_sum(mu, 250, ceil(mu + 10 * sqrt(mu) + 20))
    large = log(mu * (2 * np.pi * np.e)) * 0.5 - 1.0 / (mu * 12)
    result = where(mu == 0, 0.0, where(mu < 10, small, where(mu < 100, medium, large)))
    return broadcast_to(result, shape)
