"""scanlib.scipy.stats.betabinom: the beta-binomial distribution's logpmf and pmf, as
jax.scipy.stats.betabinom (the same formula, through betaln). Imports ops."""

from __future__ import annotations

import numpy as np

from ...ops import exp, floor, log1p, where
from ...tape import Tensor
from ..special import betaln, promote_inexact

__all__ = ["logpmf", "pmf"]


def logpmf(k, n, a, b, loc=0) -> Tensor:
    """log P(K = k) = betaln(y + a, n - y + b) - betaln(a, b) - log(n + 1) - betaln(n - y + 1,
    y + 1), y = floor(k) - loc, as jax.scipy.stats.betabinom.logpmf: -inf where y < -loc, y > n
    or y + a <= 0; nan where n < 0, a <= 0 or b <= 0. k counts as floor(k), as in JAX.

    >>> sl.scipy.stats.betabinom.logpmf(sl.tensor([0.0, 2.0, 5.0, 6.0]), 5.0, 2.0, 3.0)
    """
    k, n, a, b, loc = promote_inexact("betabinom.logpmf", k, n, a, b, loc)
    y = floor(k) - loc
    combiln = -(log1p(n) + betaln(n - y + 1, y + 1))
    log_probs = combiln + (betaln(y + a, n - y + b) - betaln(a, b))
    log_probs = where((y == 0) & (n == 0), 0.0, log_probs)
    log_probs = where((y < -loc) | (y > n) | (y + a <= 0), -np.inf, log_probs)
    return where((n < 0) | (a <= 0) | (b <= 0), np.nan, log_probs)


def pmf(k, n, a, b, loc=0) -> Tensor:
    """P(K = k) = exp(logpmf(k, n, a, b, loc)), as jax.scipy.stats.betabinom.pmf.

    >>> sl.scipy.stats.betabinom.pmf(sl.tensor([0.0, 2.0, 5.0]), 5.0, 2.0, 3.0)
    """
    return exp(logpmf(k, n, a, b, loc))
