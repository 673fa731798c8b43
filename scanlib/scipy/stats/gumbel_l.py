"""scanlib.scipy.stats.gumbel_l: the left-skewed Gumbel distribution's logpdf, pdf, cdf,
logcdf, sf, logsf and ppf, as jax.scipy.stats.gumbel_l (the same formulas; nan where scale
<= 0). Imports ops."""

from __future__ import annotations

import numpy as np

from ...ops import exp, expm1, log, where
from ...tape import Tensor
from ..special import promote_inexact, xlog1py, xlogy

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf"]


def logpdf(x, loc=0, scale=1) -> Tensor:
    """-log(scale) + z - exp(z), z = (x - loc) / scale, as jax.scipy.stats.gumbel_l.logpdf.

    >>> sl.scipy.stats.gumbel_l.logpdf(sl.tensor([-1.0, 0.0, 1.0]))
    """
    x, loc, scale = promote_inexact("gumbel_l.logpdf", x, loc, scale)
    z = (x - loc) / scale
    return where(scale > 0, xlogy(-1, scale) + (z - exp(z)), np.nan)


def pdf(x, loc=0, scale=1) -> Tensor:
    """The density exp(logpdf(x, loc, scale)), as jax.scipy.stats.gumbel_l.pdf.

    >>> sl.scipy.stats.gumbel_l.pdf(sl.tensor([-1.0, 0.0, 1.0]))
    """
    return exp(logpdf(x, loc, scale))


def logcdf(x, loc=0, scale=1) -> Tensor:
    """log(-expm1(-exp(z))), z = (x - loc) / scale, as jax.scipy.stats.gumbel_l.logcdf.

    >>> sl.scipy.stats.gumbel_l.logcdf(sl.tensor([-1.0, 0.0, 1.0]))
    """
    x, loc, scale = promote_inexact("gumbel_l.logcdf", x, loc, scale)
    z = (x - loc) / scale
    return where(scale > 0, log(-expm1(-exp(z))), np.nan)


def cdf(x, loc=0, scale=1) -> Tensor:
    """1 - exp(-exp(z)), as jax.scipy.stats.gumbel_l.cdf.

    >>> sl.scipy.stats.gumbel_l.cdf(sl.tensor([-1.0, 0.0, 1.0]))
    """
    return exp(logcdf(x, loc, scale))


def logsf(x, loc=0, scale=1) -> Tensor:
    """-exp(z), z = (x - loc) / scale, as jax.scipy.stats.gumbel_l.logsf.

    >>> sl.scipy.stats.gumbel_l.logsf(sl.tensor([-1.0, 0.0, 1.0]))
    """
    x, loc, scale = promote_inexact("gumbel_l.logsf", x, loc, scale)
    return where(scale > 0, -exp((x - loc) / scale), np.nan)


def sf(x, loc=0, scale=1) -> Tensor:
    """exp(-exp(z)), as jax.scipy.stats.gumbel_l.sf.

    >>> sl.scipy.stats.gumbel_l.sf(sl.tensor([-1.0, 0.0, 1.0]))
    """
    return exp(logsf(x, loc, scale))


def ppf(p, loc=0, scale=1) -> Tensor:
    """The quantile loc + scale log(-log1p(-p)), nan outside (0, 1), as
    jax.scipy.stats.gumbel_l.ppf.

    >>> sl.scipy.stats.gumbel_l.ppf(sl.tensor([0.1, 0.5, 0.9]))
    """
    p, loc, scale = promote_inexact("gumbel_l.ppf", p, loc, scale)
    return where((p > 0) & (p < 1), loc + scale * log(xlog1py(-1, -p)), np.nan)
