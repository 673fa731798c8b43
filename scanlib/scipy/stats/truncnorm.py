"""scanlib.scipy.stats.truncnorm: the normal distribution truncated to a <= (x - loc) / scale
<= b, its logpdf, pdf, logcdf, cdf, logsf and sf, as jax.scipy.stats.truncnorm (the same
formulas: the normal mass between a and b from log_ndtr of the tail nearer to it). Imports ops."""

from __future__ import annotations

import numpy as np

from ...ops import broadcast_arrays, exp, isnan, log1p, ones_like, select, stack, where
from ...tape import Tensor
from ..special import log_ndtr, logsumexp, ndtr, promote_inexact
from . import norm

__all__ = ["logpdf", "pdf", "logcdf", "cdf", "logsf", "sf"]


def _log_diff(x, y):
    """log(exp(x) - exp(y)) (nan where y > x)."""
    return logsumexp(stack([x, y]), b=stack([ones_like(x), -ones_like(y)]), axis=0)


def _log_gauss_mass(a, b):
    """log(ndtr(b) - ndtr(a)): through the tail on a's or b's side where both are on one side
    of 0, through log1p of the two tails where 0 lies between them."""
    a, b = broadcast_arrays(a, b)
    case_left = b <= 0
    case_right = a > 0
    a_tail = where(case_right, -b, a)
    b_tail = where(case_right, -a, b)
    mass_tail = _log_diff(log_ndtr(b_tail), log_ndtr(a_tail))
    mass_central = log1p(-ndtr(a) - ndtr(-b))
    return where(case_left | case_right, mass_tail, mass_central)


def logpdf(x, a, b, loc=0, scale=1) -> Tensor:
    """log of the density of the normal(loc, scale) truncated to a <= (x - loc) / scale <= b,
    as jax.scipy.stats.truncnorm.logpdf: norm.logpdf(x, loc, scale) - log(ndtr(b) - ndtr(a));
    -inf outside [a, b], nan where a >= b.

    >>> sl.scipy.stats.truncnorm.logpdf(sl.tensor([-1.0, 0.5, 3.0]), -1.5, 2.0)
    """
    x, a, b, loc, scale = promote_inexact("truncnorm.logpdf", x, a, b, loc, scale)
    val = norm.logpdf(x, loc, scale) - _log_gauss_mass(a, b)
    x_scaled = (x - loc) / scale
    val = where((x_scaled < a) | (x_scaled > b), -np.inf, val)
    return where(a >= b, np.nan, val)


def pdf(x, a, b, loc=0, scale=1) -> Tensor:
    """The density exp(logpdf(x, a, b, loc, scale)), as jax.scipy.stats.truncnorm.pdf.

    >>> sl.scipy.stats.truncnorm.pdf(sl.tensor([-1.0, 0.5]), -1.5, 2.0)
    """
    return exp(logpdf(x, a, b, loc, scale))


def logcdf(x, a, b, loc=0, scale=1) -> Tensor:
    """log P(X <= x), as jax.scipy.stats.truncnorm.logcdf: the mass from a to y = (x - loc) /
    scale over the mass from a to b, near 0 as log1p(-sf); 0 from b on, -inf up to a, nan
    where a >= b or where x, a or b is nan (JAX's gives 0 or -inf there).

    >>> sl.scipy.stats.truncnorm.logcdf(sl.tensor([-1.0, 0.5, 3.0]), -1.5, 2.0)
    """
    x, a, b, loc, scale = promote_inexact("truncnorm.logcdf", x, a, b, loc, scale)
    x, a, b = broadcast_arrays(x, a, b)
    y = (x - loc) / scale
    lgm_ab = _log_gauss_mass(a, b)
    log_cdf = _log_gauss_mass(a, y) - lgm_ab
    log_sf = _log_gauss_mass(y, b) - lgm_ab
    log_cdf = select([y >= b, y <= a, log_cdf > -0.1, y > a],
                     [0.0, -np.inf, log1p(-exp(log_sf)), log_cdf])
    return where((a >= b) | isnan(y) | isnan(a) | isnan(b), np.nan, log_cdf)


def cdf(x, a, b, loc=0, scale=1) -> Tensor:
    """P(X <= x) = exp(logcdf(x, a, b, loc, scale)), as jax.scipy.stats.truncnorm.cdf.

    >>> sl.scipy.stats.truncnorm.cdf(sl.tensor([-1.0, 0.5, 3.0]), -1.5, 2.0)
    """
    return exp(logcdf(x, a, b, loc, scale))


def logsf(x, a, b, loc=0, scale=1) -> Tensor:
    """log P(X > x) = logcdf(-x, -b, -a, -loc, scale), as jax.scipy.stats.truncnorm.logsf.

    >>> sl.scipy.stats.truncnorm.logsf(sl.tensor([-1.0, 0.5, 3.0]), -1.5, 2.0)
    """
    x, a, b, loc, scale = promote_inexact("truncnorm.logsf", x, a, b, loc, scale)
    return logcdf(-x, -b, -a, -loc, scale)


def sf(x, a, b, loc=0, scale=1) -> Tensor:
    """P(X > x) = exp(logsf(x, a, b, loc, scale)), as jax.scipy.stats.truncnorm.sf.

    >>> sl.scipy.stats.truncnorm.sf(sl.tensor([-1.0, 0.5, 3.0]), -1.5, 2.0)
    """
    return exp(logsf(x, a, b, loc, scale))
