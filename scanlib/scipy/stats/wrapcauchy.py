"""scanlib.scipy.stats.wrapcauchy: the wrapped Cauchy distribution on [0, 2 pi]'s logpdf and
pdf, as jax.scipy.stats.wrapcauchy (the same formula). Imports ops."""

from __future__ import annotations

import math

import numpy as np

from ...ops import cos, exp, log, where
from ...tape import Tensor
from ..special import promote_inexact

__all__ = ["logpdf", "pdf"]


def logpdf(x, c) -> Tensor:
    """log(1 - c**2) - log(2 pi) - log(1 + c**2 - 2 c cos(x)) for x in [0, 2 pi] (-inf
    outside) and 0 < c < 1 (nan otherwise), as jax.scipy.stats.wrapcauchy.logpdf.

    >>> sl.scipy.stats.wrapcauchy.logpdf(sl.tensor([0.0, 1.0, 3.0]), 0.5)
    """
    x, c = promote_inexact("wrapcauchy.logpdf", x, c)
    value = log(1 - c * c) - math.log(2 * math.pi) - log(1 + c * c - 2 * c * cos(x))
    inside = where((x >= 0) & (x <= 2 * math.pi), value, -np.inf)
    return where((c > 0) & (c < 1), inside, np.nan)


def pdf(x, c) -> Tensor:
    """The density exp(logpdf(x, c)), as jax.scipy.stats.wrapcauchy.pdf.

    >>> sl.scipy.stats.wrapcauchy.pdf(sl.tensor([0.0, 1.0, 3.0]), 0.5)
    """
    return exp(logpdf(x, c))
