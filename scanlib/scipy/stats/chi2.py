"""scanlib.scipy.stats.chi2: the chi-squared distribution's logpdf and pdf, as
jax.scipy.stats.chi2 (the same formulas). Imports ops."""

from __future__ import annotations

import math

import numpy as np

from ...ops import exp, log, where
from ...tape import Tensor
from ..special import gammaln, promote_inexact

__all__ = ["logpdf", "pdf"]


def logpdf(x, df, loc=0, scale=1) -> Tensor:
    """log of the chi-squared density with df degrees of freedom, as
    jax.scipy.stats.chi2.logpdf: (df / 2 - 1) log(y) - y / 2 - lgamma(df / 2) - df log(2) / 2
    - log(scale), y = (x - loc) / scale; -inf below loc.

    >>> sl.scipy.stats.chi2.logpdf(sl.tensor([0.5, 2.0]), 3.0)
    """
    x, df, loc, scale = promote_inexact("chi2.logpdf", x, df, loc, scale)
    y = (x - loc) / scale
    half_df = df / 2
    kernel = (half_df - 1) * log(y) - y / 2
    normalizer = -(gammaln(half_df) + math.log(2.0) * df / 2)
    return where(x < loc, -np.inf, normalizer - log(scale) + kernel)


def pdf(x, df, loc=0, scale=1) -> Tensor:
    """The chi-squared density exp(logpdf(x, df, loc, scale)), as jax.scipy.stats.chi2.pdf.

    >>> sl.scipy.stats.chi2.pdf(sl.tensor([0.5, 2.0]), 3.0)
    """
    return exp(logpdf(x, df, loc, scale))
