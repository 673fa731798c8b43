"""scanlib.scipy.stats.vonmises: the von Mises distribution's logpdf and pdf, as
jax.scipy.stats.vonmises (the same formula, through i0e). Imports ops."""

from __future__ import annotations

import math

import numpy as np

from ...ops import cos, exp, log, where
from ...tape import Tensor
from ..special import i0e, promote_inexact

__all__ = ["logpdf", "pdf"]


def logpdf(x, kappa) -> Tensor:
    """kappa (cos(x) - 1) - log(2 pi i0e(kappa)), the log density of the von Mises
    distribution of concentration kappa on the circle, as jax.scipy.stats.vonmises.logpdf:
    nan where kappa <= 0.

    >>> sl.scipy.stats.vonmises.logpdf(sl.tensor([0.0, 1.0, 3.0]), 2.0)
    """
    x, kappa = promote_inexact("vonmises.logpdf", x, kappa)
    return where(kappa > 0, kappa * (cos(x) - 1) - log(i0e(kappa) * (2 * math.pi)), np.nan)


def pdf(x, kappa) -> Tensor:
    """The density exp(logpdf(x, kappa)), as jax.scipy.stats.vonmises.pdf.

    >>> sl.scipy.stats.vonmises.pdf(sl.tensor([0.0, 1.0]), 2.0)
    """
    return exp(logpdf(x, kappa))
