"""scanlib.scipy.stats.gumbel_r: the right-skewed Gumbel distribution's logpdf, pdf, cdf,
logcdf, sf, logsf and ppf, as jax.scipy.stats.gumbel_r (the same formulas; nan where scale
<= 0). Imports ops and nn."""

from __future__ import annotations

import numpy as np

from ...nn import log1mexp
from ...ops import exp, log, where
from ...tape import Tensor
from ..special import promote_inexact, xlogy

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf"]


def logpdf(x, loc=0, scale=1) -> Tensor:
    """-log(scale) - z - exp(-z), z = (x - loc) / scale, as jax.scipy.stats.gumbel_r.logpdf.

    >>> sl.scipy.stats.gumbel_r.logpdf(sl.tensor([-1.0, 0.0, 1.0]))
    """
    x, loc, scale = promote_inexact("gumbel_r.logpdf", x, loc, scale)
    z = (x - loc) / scale
    return where(scale > 0, xlogy(-1, scale) - (z + exp(-z)), np.nan)


def pdf(x, loc=0, scale=1) -> Tensor:
    """The density exp(logpdf(x, loc, scale)), as jax.scipy.stats.gumbel_r.pdf.

    >>> sl.scipy.stats.gumbel_r.pdf(sl.tensor([-1.0, 0.0, 1.0]))
    """
    return exp(logpdf(x, loc, scale))


def logcdf(x, loc=0, scale=1) -> Tensor:
    """-exp(-z), z = (x - loc) / scale, as jax.scipy.stats.gumbel_r.logcdf.

    >>> sl.scipy.stats.gumbel_r.logcdf(sl.tensor([-1.0, 0.0, 1.0]))
    """
    x, loc, scale = promote_inexact("gumbel_r.logcdf", x, loc, scale)
    return where(scale > 0, -exp(-((x - loc) / scale)), np.nan)


def cdf(x, loc=0, scale=1) -> Tensor:
    """exp(-exp(-z)), as jax.scipy.stats.gumbel_r.cdf.

    >>> sl.scipy.stats.gumbel_r.cdf(sl.tensor([-1.0, 0.0, 1.0]))
    """
    return exp(logcdf(x, loc, scale))


def sf(x, loc=0, scale=1) -> Tensor:
    """1 - exp(-exp(-z)), as jax.scipy.stats.gumbel_r.sf.

    >>> sl.scipy.stats.gumbel_r.sf(sl.tensor([-1.0, 0.0, 1.0]))
    """
    x, loc, scale = promote_inexact("gumbel_r.sf", x, loc, scale)
    return where(scale > 0, 1 - exp(-exp((loc - x) / scale)), np.nan)


def logsf(x, loc=0, scale=1) -> Tensor:
    """log1mexp(exp(-z)) = log(1 - exp(-exp(-z))), accurate in the upper tail, as
    jax.scipy.stats.gumbel_r.logsf.

    >>> sl.scipy.stats.gumbel_r.logsf(sl.tensor([-1.0, 0.0, 10.0]))
    """
    x, loc, scale = promote_inexact("gumbel_r.logsf", x, loc, scale)
    return where(scale > 0, log1mexp(exp((loc - x) / scale)), np.nan)


def ppf(p, loc=0, scale=1) -> Tensor:
    """The quantile loc - scale log(-log(p)), nan outside (0, 1), as
    jax.scipy.stats.gumbel_r.ppf.

    >>> sl.scipy.stats.gumbel_r.ppf(sl.tensor([0.1, 0.5, 0.9]))
    """
    p, loc, scale = promote_inexact("gumbel_r.ppf", p, loc, scale)
    return where((p > 0) & (p < 1), loc - scale * log(xlogy(-1, p)), np.nan)
