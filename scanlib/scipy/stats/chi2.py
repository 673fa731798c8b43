"""scanlib.scipy.stats.chi2: the chi-squared distribution's logpdf, pdf, cdf,
logcdf, sf and logsf, as jax.scipy.stats.chi2 (the same formulas). Imports ops."""

from __future__ import annotations

import math

import numpy as np

from ...ops import clip, exp, log, where
from ...tape import Tensor
from ..special import gammainc, gammaincc, gammaln, promote_inexact

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]


def logpdf(x, df, loc=0, scale=1) -> Tensor:
    """log of the chi-squared density with df degrees of freedom, as
    jax.scipy.stats.chi2.logpdf: (df / 2 - 1) log(y) - y / 2 - lgamma(df / 2) - df log(2) / 2
    - log(scale), y = (x - loc) / scale; -inf below loc.

    >>> sl.scipy.stats.chi2.logpdf(sl.tensor([0.5, 2.0]), 3.0)
    """
    x, df, loc, scale = promote_inexact("chi2.logpdf", x, df, loc, scale)
    y = (x - loc) / scale
    half_df = df / 2
    kernel = (half_df - 1) * log(y) - y / 2
    normalizer = -(gammaln(half_df) + math.log(2.0) * df / 2)
    return where(x < loc, -np.inf, normalizer - log(scale) + kernel)


def pdf(x, df, loc=0, scale=1) -> Tensor:
    """The chi-squared density exp(logpdf(x, df, loc, scale)), as jax.scipy.stats.chi2.pdf.

    >>> sl.scipy.stats.chi2.pdf(sl.tensor([0.5, 2.0]), 3.0)
    """
    return exp(logpdf(x, df, loc, scale))


def _half_y(who, x, df, loc, scale):
    x, df, loc, scale = promote_inexact(who, x, df, loc, scale)
    return df / 2, clip((x - loc) / (scale * 2), 0, np.inf)


def cdf(x, df, loc=0, scale=1) -> Tensor:
    """P(X <= x) = gammainc(df / 2, y / 2), y = (x - loc) / scale clipped to [0, inf], as
    jax.scipy.stats.chi2.cdf. Differentiable in x, loc and scale to every order, once in df.

    >>> sl.scipy.stats.chi2.cdf(sl.tensor([-1.0, 0.5, 2.0]), 3.0)
    """
    return gammainc(*_half_y("chi2.cdf", x, df, loc, scale))


def logcdf(x, df, loc=0, scale=1) -> Tensor:
    """log(cdf(x, df, loc, scale)), as jax.scipy.stats.chi2.logcdf.

    >>> sl.scipy.stats.chi2.logcdf(sl.tensor([0.5, 2.0]), 3.0)
    """
    return log(cdf(x, df, loc, scale))


def sf(x, df, loc=0, scale=1) -> Tensor:
    """P(X > x) = gammaincc(df / 2, y / 2), y clipped as in cdf, as jax.scipy.stats.chi2.sf.

    >>> sl.scipy.stats.chi2.sf(sl.tensor([-1.0, 0.5, 20.0]), 3.0)
    """
    return gammaincc(*_half_y("chi2.sf", x, df, loc, scale))


def logsf(x, df, loc=0, scale=1) -> Tensor:
    """log(sf(x, df, loc, scale)), as jax.scipy.stats.chi2.logsf.

    >>> sl.scipy.stats.chi2.logsf(sl.tensor([0.5, 20.0]), 3.0)
    """
    return log(sf(x, df, loc, scale))
