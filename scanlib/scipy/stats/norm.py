"""scanlib.scipy.stats.norm: the normal distribution's logpdf, pdf, cdf, sf, as
jax.scipy.stats.norm (the same formulas). Imports ops."""

from __future__ import annotations

import math

from ...ops import elementwise as ew
from ...tape import Tensor
from ..special import promote_inexact, ndtr

__all__ = ["logpdf", "pdf", "cdf", "sf"]

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
