"""scanlib.scipy.stats.norm: the normal distribution's logpdf, pdf, cdf, sf, logcdf, logsf,
ppf and isf, as jax.scipy.stats.norm (the same formulas; isf without forming 1 - q). Imports
ops."""

from __future__ import annotations

import math

from ...ops import elementwise as ew
from ...tape import Tensor
from ..special import log_ndtr, ndtr, ndtri, promote_inexact

__all__ = ["logpdf", "pdf", "cdf", "sf", "logcdf", "logsf", "ppf", "isf"]

_TWO_PI = 2.0 * math.pi


def _promoted(x, loc, scale):
    return promote_inexact("norm", x, loc, scale)


def logpdf(x, loc=0, scale=1) -> Tensor:
    """log N(x; loc, scale**2), as jax.scipy.stats.norm.logpdf:
    -(log(2 pi scale**2) + ((x - loc) / scale)**2) / 2.

    >>> sl.scipy.stats.norm.logpdf(sl.tensor([0.0, 1.0]), loc=0.0, scale=2.0)
    """
    x, loc, scale = _promoted(x, loc, scale)
    scale_sqrd = ew.mul(scale, scale)
    log_normalizer = ew.log(ew.mul(scale_sqrd, _TWO_PI))
    d = ew.sub(x, loc)
    quadratic = ew.div(ew.mul(d, d), scale_sqrd)
    return ew.div(ew.add(log_normalizer, quadratic), -2.0)


def pdf(x, loc=0, scale=1) -> Tensor:
    """The normal density exp(logpdf(x, loc, scale)), as jax.scipy.stats.norm.pdf.

    >>> sl.scipy.stats.norm.pdf(sl.tensor([0.0]))
    """
    return ew.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1) -> Tensor:
    """P(X <= x) = ndtr((x - loc) / scale), as jax.scipy.stats.norm.cdf.

    >>> sl.scipy.stats.norm.cdf(sl.tensor([-1.0, 0.0, 1.0]))
    """
    x, loc, scale = _promoted(x, loc, scale)
    return ndtr(ew.div(ew.sub(x, loc), scale))


def sf(x, loc=0, scale=1) -> Tensor:
    """P(X > x) = ndtr((loc - x) / scale), accurate in the upper tail, as
    jax.scipy.stats.norm.sf.

    >>> sl.scipy.stats.norm.sf(sl.tensor([0.0, 30.0]))
    """
    x, loc, scale = _promoted(x, loc, scale)
    return ndtr(ew.div(ew.sub(loc, x), scale))


def logcdf(x, loc=0, scale=1) -> Tensor:
    """log P(X <= x) = log_ndtr((x - loc) / scale), accurate far in the lower tail, as
    jax.scipy.stats.norm.logcdf.

    >>> sl.scipy.stats.norm.logcdf(sl.tensor([-50.0, 0.0, 5.0]))
    """
    x, loc, scale = _promoted(x, loc, scale)
    return log_ndtr(ew.div(ew.sub(x, loc), scale))


def logsf(x, loc=0, scale=1) -> Tensor:
    """log P(X > x) = log_ndtr((loc - x) / scale), accurate far in the upper tail, as
    jax.scipy.stats.norm.logsf.

    >>> sl.scipy.stats.norm.logsf(sl.tensor([-5.0, 0.0, 50.0]))
    """
    x, loc, scale = _promoted(x, loc, scale)
    return log_ndtr(ew.div(ew.sub(loc, x), scale))


def ppf(q, loc=0, scale=1) -> Tensor:
    """The quantile function, ndtri(q) * scale + loc, as jax.scipy.stats.norm.ppf (float32
    input stays float32 here).

    >>> sl.scipy.stats.norm.ppf(sl.tensor([0.025, 0.5, 0.975]), loc=1.0, scale=2.0)
    """
    q, loc, scale = _promoted(q, loc, scale)
    return ew.add(ew.mul(ndtri(q), scale), loc)


def isf(q, loc=0, scale=1) -> Tensor:
    """The inverse survival function, the x with P(X > x) = q: loc - ndtri(q) * scale, as
    jax.scipy.stats.norm.isf (which computes ppf(1 - q), losing q below 1e-16; this does not).

    >>> sl.scipy.stats.norm.isf(sl.tensor([1e-20, 0.5, 0.975]))
    """
    q, loc, scale = _promoted(q, loc, scale)
    return ew.sub(loc, ew.mul(ndtri(q), scale))
