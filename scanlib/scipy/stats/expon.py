"""scanlib.scipy.stats.expon: the exponential distribution's logpdf, pdf, cdf, logcdf, sf,
logsf and ppf, as jax.scipy.stats.expon (the same formulas). Imports ops."""

from __future__ import annotations

import numpy as np

from ...ops import exp, expm1, isnan, log, log1p, where
from ...tape import Tensor
from ..special import promote_inexact

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf"]


def logpdf(x, loc=0, scale=1) -> Tensor:
    """-(x - loc) / scale - log(scale) from loc on, -inf below, as
    jax.scipy.stats.expon.logpdf.

    >>> sl.scipy.stats.expon.logpdf(sl.tensor([-1.0, 0.0, 2.0]), scale=2.0)
    """
    x, loc, scale = promote_inexact("expon.logpdf", x, loc, scale)
    return where(x < loc, -np.inf, -((x - loc) / scale + log(scale)))


def pdf(x, loc=0, scale=1) -> Tensor:
    """The exponential density exp(logpdf(x, loc, scale)), as jax.scipy.stats.expon.pdf.

    >>> sl.scipy.stats.expon.pdf(sl.tensor([-1.0, 0.0, 2.0]))
    """
    return exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1) -> Tensor:
    """-expm1(-(x - loc) / scale) from loc on, 0 below, as jax.scipy.stats.expon.cdf.

    >>> sl.scipy.stats.expon.cdf(sl.tensor([-1.0, 1e-10, 2.0]))
    """
    x, loc, scale = promote_inexact("expon.cdf", x, loc, scale)
    neg_z = (loc - x) / scale
    return where(x < loc, 0.0, -expm1(neg_z))


def logsf(x, loc=0, scale=1) -> Tensor:
    """log P(X > x) = -(x - loc) / scale from loc on, 0 below, as jax.scipy.stats.expon.logsf.

    >>> sl.scipy.stats.expon.logsf(sl.tensor([-1.0, 2.0]))
    """
    x, loc, scale = promote_inexact("expon.logsf", x, loc, scale)
    neg_z = (loc - x) / scale
    return where(x < loc, 0.0, neg_z)


def sf(x, loc=0, scale=1) -> Tensor:
    """P(X > x) = exp(logsf(x, loc, scale)), as jax.scipy.stats.expon.sf.

    >>> sl.scipy.stats.expon.sf(sl.tensor([-1.0, 2.0]))
    """
    return exp(logsf(x, loc, scale))


def logcdf(x, loc=0, scale=1) -> Tensor:
    """log1p(-sf(x, loc, scale)), as jax.scipy.stats.expon.logcdf.

    >>> sl.scipy.stats.expon.logcdf(sl.tensor([0.5, 2.0]))
    """
    return log1p(-sf(x, loc, scale))


def ppf(q, loc=0, scale=1) -> Tensor:
    """The quantile loc - scale log1p(-q), nan for q outside [0, 1], as
    jax.scipy.stats.expon.ppf.

    >>> sl.scipy.stats.expon.ppf(sl.tensor([0.0, 0.5, 0.9]))
    """
    q, loc, scale = promote_inexact("expon.ppf", q, loc, scale)
    return where(isnan(q) | (q < 0) | (q > 1), np.nan, loc - scale * log1p(-q))
