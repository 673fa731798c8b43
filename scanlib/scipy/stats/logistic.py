"""scanlib.scipy.stats.logistic: the logistic distribution's logpdf, pdf, cdf, sf, ppf and
isf, as jax.scipy.stats.logistic (the same formulas). Imports ops."""

from __future__ import annotations

from ...ops import exp, log, logaddexp
from ...tape import Tensor
from ..special import expit, logit, promote_inexact

__all__ = ["logpdf", "pdf", "cdf", "sf", "ppf", "isf"]


def logpdf(x, loc=0, scale=1) -> Tensor:
    """-2 logaddexp(z / 2, -z / 2) - log(scale), z = (x - loc) / scale, as
    jax.scipy.stats.logistic.logpdf (stable in both tails).

    >>> sl.scipy.stats.logistic.logpdf(sl.tensor([0.0, 1.0, 800.0]))
    """
    x, loc, scale = promote_inexact("logistic.logpdf", x, loc, scale)
    half_z = (x - loc) / scale / 2
    return logaddexp(half_z, -half_z) * -2 - log(scale)


def pdf(x, loc=0, scale=1) -> Tensor:
    """The logistic density exp(logpdf(x, loc, scale)), as jax.scipy.stats.logistic.pdf.

    >>> sl.scipy.stats.logistic.pdf(sl.tensor([0.0, 1.0]))
    """
    return exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1) -> Tensor:
    """expit((x - loc) / scale), as jax.scipy.stats.logistic.cdf.

    >>> sl.scipy.stats.logistic.cdf(sl.tensor([-1.0, 0.0, 1.0]))
    """
    x, loc, scale = promote_inexact("logistic.cdf", x, loc, scale)
    return expit((x - loc) / scale)


def sf(x, loc=0, scale=1) -> Tensor:
    """expit(-(x - loc) / scale), as jax.scipy.stats.logistic.sf.

    >>> sl.scipy.stats.logistic.sf(sl.tensor([-1.0, 0.0, 1.0]))
    """
    x, loc, scale = promote_inexact("logistic.sf", x, loc, scale)
    return expit(-((x - loc) / scale))


def ppf(x, loc=0, scale=1) -> Tensor:
    """The quantile logit(x) scale + loc, as jax.scipy.stats.logistic.ppf.

    >>> sl.scipy.stats.logistic.ppf(sl.tensor([0.25, 0.5, 0.75]))
    """
    x, loc, scale = promote_inexact("logistic.ppf", x, loc, scale)
    return logit(x) * scale + loc


def isf(x, loc=0, scale=1) -> Tensor:
    """The inverse of sf, -logit(x) scale + loc, as jax.scipy.stats.logistic.isf.

    >>> sl.scipy.stats.logistic.isf(sl.tensor([0.25, 0.5, 0.75]))
    """
    x, loc, scale = promote_inexact("logistic.isf", x, loc, scale)
    return -logit(x) * scale + loc
