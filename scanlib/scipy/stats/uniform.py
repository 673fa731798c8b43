"""scanlib.scipy.stats.uniform: the uniform distribution on [loc, loc + scale]: logpdf, pdf,
cdf and ppf, as jax.scipy.stats.uniform (the same formulas). Imports ops."""

from __future__ import annotations

import numpy as np

from ...ops import exp, isnan, log, select, where
from ...tape import Tensor
from ..special import promote_inexact

__all__ = ["logpdf", "pdf", "cdf", "ppf"]


def logpdf(x, loc=0, scale=1) -> Tensor:
    """-log(scale) on [loc, loc + scale] (both ends included), -inf outside, as
    jax.scipy.stats.uniform.logpdf.

    >>> sl.scipy.stats.uniform.logpdf(sl.tensor([-0.5, 0.0, 0.5, 1.0]), 0.0, 2.0)
    """
    x, loc, scale = promote_inexact("uniform.logpdf", x, loc, scale)
    return where((x > loc + scale) | (x < loc), -np.inf, -log(scale))


def pdf(x, loc=0, scale=1) -> Tensor:
    """1 / scale on [loc, loc + scale], 0 outside, as jax.scipy.stats.uniform.pdf.

    >>> sl.scipy.stats.uniform.pdf(sl.tensor([-0.5, 0.5]), 0.0, 2.0)
    """
    return exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1) -> Tensor:
    """0 below loc, (x - loc) / scale on [loc, loc + scale], 1 above, as
    jax.scipy.stats.uniform.cdf (0 where x is nan, as JAX's select).

    >>> sl.scipy.stats.uniform.cdf(sl.tensor([-1.0, 0.5, 3.0]), 0.0, 2.0)
    """
    x, loc, scale = promote_inexact("uniform.cdf", x, loc, scale)
    hi = loc + scale
    return select([x < loc, x > hi, (x >= loc) & (x <= hi)],
                  [0.0, 1.0, (x - loc) / scale])


def ppf(q, loc=0, scale=1) -> Tensor:
    """The quantile loc + scale q, nan for q outside [0, 1], as jax.scipy.stats.uniform.ppf.

    >>> sl.scipy.stats.uniform.ppf(sl.tensor([0.0, 0.5, 1.5]), 1.0, 2.0)
    """
    q, loc, scale = promote_inexact("uniform.ppf", q, loc, scale)
    return where(isnan(q) | (q < 0) | (q > 1), np.nan, loc + scale * q)
