"""scanlib.scipy.stats.bernoulli: the Bernoulli distribution's logpmf, pmf, cdf and ppf, as
jax.scipy.stats.bernoulli (the same formulas). Imports ops."""

from __future__ import annotations

import numpy as np

from ...ops import astype, exp, isnan, where
from ...tape import Tensor
from ..special import promote_inexact, xlog1py, xlogy

__all__ = ["logpmf", "pmf", "cdf", "ppf"]


def logpmf(k, p, loc=0) -> Tensor:
    """y log(p) + (1 - y) log1p(-p), y = k - loc, -inf outside [0, 1], as
    jax.scipy.stats.bernoulli.logpmf (which, as JAX, does not check that y is 0 or 1).

    >>> sl.scipy.stats.bernoulli.logpmf(sl.tensor([0.0, 1.0, 2.0]), 0.3)
    """
    k, p, loc = promote_inexact("bernoulli.logpmf", k, p, loc)
    y = k - loc
    log_probs = xlogy(y, p) + xlog1py(1 - y, -p)
    return where((y < 0) | (y > 1), -np.inf, log_probs)


def pmf(k, p, loc=0) -> Tensor:
    """P(K = k) = exp(logpmf(k, p, loc)), as jax.scipy.stats.bernoulli.pmf.

    >>> sl.scipy.stats.bernoulli.pmf(sl.tensor([0.0, 1.0]), 0.3)
    """
    return exp(logpmf(k, p, loc))


def cdf(k, p) -> Tensor:
    """0 below 0, 1 - p on [0, 1), 1 from 1 on; nan where k or p is nan or p is outside
    [0, 1], as jax.scipy.stats.bernoulli.cdf.

    >>> sl.scipy.stats.bernoulli.cdf(sl.tensor([-1.0, 0.0, 0.5, 1.0]), 0.3)
    """
    k, p = promote_inexact("bernoulli.cdf", k, p)
    bad = isnan(k) | isnan(p) | (p < 0) | (p > 1)
    return where(bad, np.nan, where(k < 0, 0.0, where(k < 1, 1 - p, 1.0)))


def ppf(q, p) -> Tensor:
    """The quantile: 0 for q <= 1 - p, 1 above; nan where q or p is nan or outside [0, 1], as
    jax.scipy.stats.bernoulli.ppf.

    >>> sl.scipy.stats.bernoulli.ppf(sl.tensor([0.5, 0.7, 0.8]), 0.3)
    """
    q, p = promote_inexact("bernoulli.ppf", q, p)
    bad = isnan(q) | isnan(p) | (p < 0) | (p > 1) | (q < 0) | (q > 1)
    return where(bad, np.nan, astype(q > 1 - p, q.dtype))
