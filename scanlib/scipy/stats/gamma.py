"""scanlib.scipy.stats.gamma: the gamma distribution's logpdf and pdf, as
jax.scipy.stats.gamma (the same formulas). Imports ops."""

from __future__ import annotations

import numpy as np

from ...ops import exp, log, where
from ...tape import Tensor
from ..special import gammaln, promote_inexact, xlogy

__all__ = ["logpdf", "pdf"]


def logpdf(x, a, loc=0, scale=1) -> Tensor:
    """log of the gamma density of shape a, as jax.scipy.stats.gamma.logpdf: (a - 1) log(y) - y
    - lgamma(a) - log(scale), y = (x - loc) / scale; -inf below loc.

    >>> sl.scipy.stats.gamma.logpdf(sl.tensor([0.5, 2.0, -1.0]), 2.0)
    """
    x, a, loc, scale = promote_inexact("gamma.logpdf", x, a, loc, scale)
    ok = x >= loc
    y = where(ok, (x - loc) / scale, 1)  # 1 keeps the unused branch's gradient finite
    log_probs = xlogy(a - 1, y) - y - (gammaln(a) + log(scale))
    return where(ok, log_probs, -np.inf)


def pdf(x, a, loc=0, scale=1) -> Tensor:
    """The gamma density exp(logpdf(x, a, loc, scale)), as jax.scipy.stats.gamma.pdf.

    >>> sl.scipy.stats.gamma.pdf(sl.tensor([0.5, 2.0]), 2.0, scale=0.5)
    """
    return exp(logpdf(x, a, loc, scale))
