"""scanlib.scipy.stats.beta: the beta distribution's logpdf, pdf, cdf, logcdf, sf and logsf, as
jax.scipy.stats.beta (the same formulas; the cdfs through betainc). Imports ops."""

from __future__ import annotations

import numpy as np

from ...ops import clip, exp, log, where
from ...tape import Tensor
from ..special import betainc, betaln, promote_inexact, xlog1py, xlogy

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]


def logpdf(x, a, b, loc=0, scale=1) -> Tensor:
    """log of the beta density, as jax.scipy.stats.beta.logpdf: (a - 1) log(y) + (b - 1)
    log(1 - y) - betaln(a, b) - log(scale), y = (x - loc) / scale; -inf outside loc <= x <= loc
    + scale, nan where a, b or scale is not positive.

    >>> sl.scipy.stats.beta.logpdf(sl.tensor([0.25, 0.5, 1.5]), 2.0, 3.0)
    """
    x, a, b, loc, scale = promote_inexact("beta.logpdf", x, a, b, loc, scale)
    outside = (x > loc + scale) | (x < loc)
    y = where(outside, 0.5, (x - loc) / scale)  # 0.5 keeps the unused branch's gradient finite
    log_probs = xlogy(a - 1, y) + xlog1py(b - 1, -y) - betaln(a, b) - log(scale)
    result = where(outside, -np.inf, log_probs)
    return where((a <= 0) | (b <= 0) | (scale <= 0), np.nan, result)


def pdf(x, a, b, loc=0, scale=1) -> Tensor:
    """The beta density exp(logpdf(x, a, b, loc, scale)), as jax.scipy.stats.beta.pdf.

    >>> sl.scipy.stats.beta.pdf(sl.tensor([0.25, 0.5]), 2.0, 3.0)
    """
    return exp(logpdf(x, a, b, loc, scale))


def _y(who, x, a, b, loc, scale):
    x, a, b, loc, scale = promote_inexact(who, x, a, b, loc, scale)
    return a, b, clip((x - loc) / scale, 0, 1)


def cdf(x, a, b, loc=0, scale=1) -> Tensor:
    """P(X <= x) = betainc(a, b, y), y = (x - loc) / scale clipped to [0, 1], as
    jax.scipy.stats.beta.cdf. Differentiable in x, loc and scale; a gradient with respect to
    a or b raises, as in JAX.

    >>> sl.scipy.stats.beta.cdf(sl.tensor([-1.0, 0.25, 0.5, 2.0]), 2.0, 3.0)
    """
    a, b, y = _y("beta.cdf", x, a, b, loc, scale)
    return betainc(a, b, y)


def logcdf(x, a, b, loc=0, scale=1) -> Tensor:
    """log(cdf(x, a, b, loc, scale)), as jax.scipy.stats.beta.logcdf.

    >>> sl.scipy.stats.beta.logcdf(sl.tensor([0.25, 0.5]), 2.0, 3.0)
    """
    return log(cdf(x, a, b, loc, scale))


def sf(x, a, b, loc=0, scale=1) -> Tensor:
    """P(X > x) = betainc(b, a, 1 - y), y clipped as in cdf, as jax.scipy.stats.beta.sf
    (gradients as cdf's).

    >>> sl.scipy.stats.beta.sf(sl.tensor([-1.0, 0.25, 0.5, 2.0]), 2.0, 3.0)
    """
    a, b, y = _y("beta.sf", x, a, b, loc, scale)
    return betainc(b, a, 1 - y)


def logsf(x, a, b, loc=0, scale=1) -> Tensor:
    """log(sf(x, a, b, loc, scale)), as jax.scipy.stats.beta.logsf.

    >>> sl.scipy.stats.beta.logsf(sl.tensor([0.25, 0.5]), 2.0, 3.0)
    """
    return log(sf(x, a, b, loc, scale))
