"""scanlib.scipy.stats.gennorm: the generalized normal distribution's logpdf and pdf, as
jax.scipy.stats.gennorm (the same formula). Imports ops."""

from __future__ import annotations

from ...ops import abs, exp, log, power
from ...tape import Tensor
from ..special import gammaln, promote_inexact

__all__ = ["logpdf", "pdf"]


def logpdf(x, beta) -> Tensor:
    """log(beta / 2) - lgamma(1 / beta) - |x|**beta, as jax.scipy.stats.gennorm.logpdf (beta =
    2 is a normal of variance 1/2, beta = 1 the Laplace distribution).

    >>> sl.scipy.stats.gennorm.logpdf(sl.tensor([0.0, 1.0]), 1.5)
    """
    x, beta = promote_inexact("gennorm.logpdf", x, beta)
    return log(beta * 0.5) - gammaln(1 / beta) - power(abs(x), beta)


def pdf(x, beta) -> Tensor:
    """The density exp(logpdf(x, beta)), as jax.scipy.stats.gennorm.pdf.

    >>> sl.scipy.stats.gennorm.pdf(sl.tensor([0.0, 1.0]), 1.5)
    """
    return exp(logpdf(x, beta))
