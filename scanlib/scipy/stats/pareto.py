"""scanlib.scipy.stats.pareto: the Pareto distribution's logpdf, pdf, cdf, logcdf, sf, logsf
and ppf, as jax.scipy.stats.pareto (the same formulas). Imports ops."""

from __future__ import annotations

import numpy as np

from ...ops import exp, isnan, log, log1p, power, where
from ...tape import Tensor
from ..special import promote_inexact

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf"]


def logpdf(x, b, loc=0, scale=1) -> Tensor:
    """log(b / scale) - (b + 1) log(z), z = (x - loc) / scale, for x >= loc + scale, -inf
    below, as jax.scipy.stats.pareto.logpdf.

    >>> sl.scipy.stats.pareto.logpdf(sl.tensor([0.5, 1.0, 2.0]), 3.0)
    """
    x, b, loc, scale = promote_inexact("pareto.logpdf", x, b, loc, scale)
    z = (x - loc) / scale
    log_probs = -(log(scale / b) + (b + 1) * log(z))
    return where(x < loc + scale, -np.inf, log_probs)


def pdf(x, b, loc=0, scale=1) -> Tensor:
    """The Pareto density exp(logpdf(x, b, loc, scale)), as jax.scipy.stats.pareto.pdf.

    >>> sl.scipy.stats.pareto.pdf(sl.tensor([0.5, 1.0, 2.0]), 3.0)
    """
    return exp(logpdf(x, b, loc, scale))


def cdf(x, b, loc=0, scale=1) -> Tensor:
    """1 - z**-b, z = (x - loc) / scale, 0 below loc + scale, as jax.scipy.stats.pareto.cdf.

    >>> sl.scipy.stats.pareto.cdf(sl.tensor([0.5, 1.0, 2.0]), 3.0)
    """
    x, b, loc, scale = promote_inexact("pareto.cdf", x, b, loc, scale)
    z = (x - loc) / scale
    return where(x < loc + scale, 0.0, 1 - power(z, -b))


def logcdf(x, b, loc=0, scale=1) -> Tensor:
    """log1p(-z**-b), -inf below loc + scale, as jax.scipy.stats.pareto.logcdf.

    >>> sl.scipy.stats.pareto.logcdf(sl.tensor([1.5, 2.0]), 3.0)
    """
    x, b, loc, scale = promote_inexact("pareto.logcdf", x, b, loc, scale)
    z = (x - loc) / scale
    return where(x < loc + scale, -np.inf, log1p(-power(z, -b)))


def logsf(x, b, loc=0, scale=1) -> Tensor:
    """-b log(z), 0 below loc + scale, as jax.scipy.stats.pareto.logsf.

    >>> sl.scipy.stats.pareto.logsf(sl.tensor([0.5, 1.5, 2.0]), 3.0)
    """
    x, b, loc, scale = promote_inexact("pareto.logsf", x, b, loc, scale)
    z = (x - loc) / scale
    return where(x < loc + scale, 0.0, -(b * log(z)))


def sf(x, b, loc=0, scale=1) -> Tensor:
    """P(X > x) = exp(logsf(x, b, loc, scale)), as jax.scipy.stats.pareto.sf.

    >>> sl.scipy.stats.pareto.sf(sl.tensor([0.5, 1.5, 2.0]), 3.0)
    """
    return exp(logsf(x, b, loc, scale))


def ppf(q, b, loc=0, scale=1) -> Tensor:
    """The quantile loc + scale (1 - q)**(-1 / b), nan for q outside [0, 1], as
    jax.scipy.stats.pareto.ppf.

    >>> sl.scipy.stats.pareto.ppf(sl.tensor([0.0, 0.5, 0.9]), 3.0)
    """
    q, b, loc, scale = promote_inexact("pareto.ppf", q, b, loc, scale)
    value = loc + scale * power(1 - q, -(1 / b))
    return where(isnan(q) | (q < 0) | (q > 1), np.nan, value)
