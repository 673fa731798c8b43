"""scanlib.scipy.stats.gamma: the gamma distribution's logpdf, pdf, cdf, logcdf, sf and logsf,
as jax.scipy.stats.gamma (the same formulas). Imports ops."""

from __future__ import annotations

import numpy as np

from ...ops import clip, exp, log, where
from ...tape import Tensor
from ..special import gammainc, gammaincc, gammaln, promote_inexact, xlogy

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]


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


def cdf(x, a, loc=0, scale=1) -> Tensor:
    """P(X <= x) = gammainc(a, y), y = (x - loc) / scale clipped to [0, inf], as
    jax.scipy.stats.gamma.cdf. Differentiable in x, loc and scale to every order, once in a.

    >>> sl.scipy.stats.gamma.cdf(sl.tensor([-1.0, 0.5, 2.0]), 2.0)
    """
    x, a, loc, scale = promote_inexact("gamma.cdf", x, a, loc, scale)
    return gammainc(a, clip((x - loc) / scale, 0, np.inf))


def logcdf(x, a, loc=0, scale=1) -> Tensor:
    """log(cdf(x, a, loc, scale)), as jax.scipy.stats.gamma.logcdf.

    >>> sl.scipy.stats.gamma.logcdf(sl.tensor([0.5, 2.0]), 2.0)
    """
    return log(cdf(x, a, loc, scale))


def sf(x, a, loc=0, scale=1) -> Tensor:
    """P(X > x) = gammaincc(a, y), y = (x - loc) / scale; 1 below loc, as
    jax.scipy.stats.gamma.sf (gradients as cdf's).

    >>> sl.scipy.stats.gamma.sf(sl.tensor([-1.0, 0.5, 20.0]), 2.0)
    """
    x, a, loc, scale = promote_inexact("gamma.sf", x, a, loc, scale)
    y = (x - loc) / scale
    below = y < 0
    return where(below, 1.0, gammaincc(a, where(below, 1.0, y)))


def logsf(x, a, loc=0, scale=1) -> Tensor:
    """log(sf(x, a, loc, scale)), as jax.scipy.stats.gamma.logsf.

    >>> sl.scipy.stats.gamma.logsf(sl.tensor([0.5, 20.0]), 2.0)
    """
    return log(sf(x, a, loc, scale))
