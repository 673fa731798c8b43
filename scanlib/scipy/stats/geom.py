"""scanlib.scipy.stats.geom: the geometric distribution's logpmf and pmf (trials up to and
including the first success), as jax.scipy.stats.geom (the same formulas). Imports ops."""

from __future__ import annotations

import numpy as np

from ...ops import exp, log, where
from ...tape import Tensor
from ..special import promote_inexact, xlog1py

__all__ = ["logpmf", "pmf"]


def logpmf(k, p, loc=0) -> Tensor:
    """(y - 1) log1p(-p) + log(p), y = k - loc, -inf for y <= 0, as
    jax.scipy.stats.geom.logpmf.

    >>> sl.scipy.stats.geom.logpmf(sl.tensor([0.0, 1.0, 3.0]), 0.25)
    """
    k, p, loc = promote_inexact("geom.logpmf", k, p, loc)
    y = k - loc
    return where(y <= 0, -np.inf, xlog1py(y - 1, -p) + log(p))


def pmf(k, p, loc=0) -> Tensor:
    """P(K = k) = exp(logpmf(k, p, loc)), as jax.scipy.stats.geom.pmf.

    >>> sl.scipy.stats.geom.pmf(sl.tensor([1.0, 2.0, 3.0]), 0.25)
    """
    return exp(logpmf(k, p, loc))
