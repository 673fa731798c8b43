"""scanlib.scipy.stats.t: Student's t distribution's logpdf and pdf, as jax.scipy.stats.t (the
same formulas). Imports ops."""

from __future__ import annotations

import math

from ...ops import exp, log, log1p
from ...tape import Tensor
from ..special import gammaln, promote_inexact

__all__ = ["logpdf", "pdf"]


def logpdf(x, df, loc=0, scale=1) -> Tensor:
    """log of Student's t density with df degrees of freedom, as jax.scipy.stats.t.logpdf:
    lgamma((df + 1) / 2) - lgamma(df / 2) - log(pi df scale**2) / 2 - (df + 1) / 2 log1p(z**2 /
    df), z = (x - loc) / scale.

    >>> sl.scipy.stats.t.logpdf(sl.tensor([0.0, 1.0]), 3.0)
    """
    x, df, loc, scale = promote_inexact("t.logpdf", x, df, loc, scale)
    z = (x - loc) / scale
    half_df = df / 2
    half_df_plus_half = half_df + 0.5
    normalizer = (gammaln(half_df) + log(scale * scale * math.pi * df) / 2
                  - gammaln(half_df_plus_half))
    return -(normalizer + half_df_plus_half * log1p(z * z / df))


def pdf(x, df, loc=0, scale=1) -> Tensor:
    """Student's t density exp(logpdf(x, df, loc, scale)), as jax.scipy.stats.t.pdf.

    >>> sl.scipy.stats.t.pdf(sl.tensor([0.0, 1.0]), 3.0, scale=2.0)
    """
    return exp(logpdf(x, df, loc, scale))
