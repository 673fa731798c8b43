"""scanlib.scipy.stats.cauchy: the Cauchy distribution's logpdf, pdf, cdf, logcdf, sf, logsf,
ppf and isf, as jax.scipy.stats.cauchy (the same formulas). Imports ops."""

from __future__ import annotations

import math

from ...ops import arctan, exp, log, log1p, tan
from ...tape import Tensor
from ..special import promote_inexact

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf"]


def logpdf(x, loc=0, scale=1) -> Tensor:
    """-log(pi scale) - log1p(z**2), z = (x - loc) / scale, as jax.scipy.stats.cauchy.logpdf.

    >>> sl.scipy.stats.cauchy.logpdf(sl.tensor([0.0, 1.0]), scale=2.0)
    """
    x, loc, scale = promote_inexact("cauchy.logpdf", x, loc, scale)
    z = (x - loc) / scale
    return -(log(scale * math.pi) + log1p(z * z))


def pdf(x, loc=0, scale=1) -> Tensor:
    """The Cauchy density exp(logpdf(x, loc, scale)), as jax.scipy.stats.cauchy.pdf.

    >>> sl.scipy.stats.cauchy.pdf(sl.tensor([0.0, 1.0]))
    """
    return exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1) -> Tensor:
    """1/2 + arctan((x - loc) / scale) / pi, as jax.scipy.stats.cauchy.cdf.

    >>> sl.scipy.stats.cauchy.cdf(sl.tensor([-1.0, 0.0, 1.0]))
    """
    x, loc, scale = promote_inexact("cauchy.cdf", x, loc, scale)
    return arctan((x - loc) / scale) * (1 / math.pi) + 0.5


def logcdf(x, loc=0, scale=1) -> Tensor:
    """log(cdf(x, loc, scale)), as jax.scipy.stats.cauchy.logcdf.

    >>> sl.scipy.stats.cauchy.logcdf(sl.tensor([-1.0, 0.0, 1.0]))
    """
    return log(cdf(x, loc, scale))


def sf(x, loc=0, scale=1) -> Tensor:
    """P(X > x) = cdf(-x, -loc, scale), as jax.scipy.stats.cauchy.sf.

    >>> sl.scipy.stats.cauchy.sf(sl.tensor([-1.0, 0.0, 1.0]))
    """
    x, loc, scale = promote_inexact("cauchy.sf", x, loc, scale)
    return cdf(-x, -loc, scale)


def logsf(x, loc=0, scale=1) -> Tensor:
    """log(sf(x, loc, scale)), as jax.scipy.stats.cauchy.logsf.

    >>> sl.scipy.stats.cauchy.logsf(sl.tensor([-1.0, 0.0, 1.0]))
    """
    x, loc, scale = promote_inexact("cauchy.logsf", x, loc, scale)
    return logcdf(-x, -loc, scale)


def ppf(q, loc=0, scale=1) -> Tensor:
    """The quantile loc + scale tan(pi (q - 1/2)), the inverse of cdf, as
    jax.scipy.stats.cauchy.ppf.

    >>> sl.scipy.stats.cauchy.ppf(sl.tensor([0.25, 0.5, 0.75]))
    """
    q, loc, scale = promote_inexact("cauchy.ppf", q, loc, scale)
    return tan(q * math.pi - math.pi / 2) * scale + loc


def isf(q, loc=0, scale=1) -> Tensor:
    """The inverse of sf, loc + scale tan(pi (1/2 - q)), as jax.scipy.stats.cauchy.isf.

    >>> sl.scipy.stats.cauchy.isf(sl.tensor([0.25, 0.5, 0.75]))
    """
    q, loc, scale = promote_inexact("cauchy.isf", q, loc, scale)
    return tan(math.pi / 2 - q * math.pi) * scale + loc
